"""The middleware on a server policy, and what issue 31 found in both packages: a SHADOW policy
never holds a request (defect 3: Node did), the default key is ``ratelimit:`` + the tenant with
the tenant by Node's address rule (defect 5, ``clients/key-layout.json``, read by the Node and
Go tests too), ``RateLimit-Policy`` carries the policy's window ``w``, yes/no options take only
``True``/``False`` (defect 12), and a failure is logged with its cause (defect 7)."""

from __future__ import annotations

import json
import logging
import signal
import time
from pathlib import Path
from typing import Any, Dict, Iterator, List, Tuple

import pytest
import redis
from conftest import MODULE, SERVER, Server, calls
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import PlainTextResponse
from starlette.routing import Route
from starlette.testclient import TestClient

from redis_ratelimit import AsyncRateLimit, Leaky, Period, RateLimit, Slide, Token
from redis_ratelimit.addresses import address_key
from redis_ratelimit.middleware import RateLimitMiddleware

LAYOUT: Dict[str, Any] = json.loads((Path(__file__).resolve().parents[2] / "key-layout.json").read_text())


@pytest.fixture
def r(server: Server, raw: redis.Redis) -> Iterator[RateLimit]:
    rl = RateLimit(port=server.port)
    for name in rl.policies():
        rl.delete_policy(name)
    yield rl
    rl.close()


def _app(port: int, **options: Any) -> Starlette:
    async def hello(request: Request) -> PlainTextResponse:
        return PlainTextResponse("hello")

    app = Starlette(routes=[Route("/", hello)])
    app.add_middleware(RateLimitMiddleware, client=AsyncRateLimit(port=port), **options)
    return app


def test_a_shadow_policy_answers_its_would_be_refusals_at_once(r: RateLimit, server: Server) -> None:
    r.set_policy("shadow5", Period(5, "1m"), shadow=True)
    app = _app(server.port, policy="shadow5", key=lambda request: "tenant-shadow")
    with TestClient(app) as http:
        for _ in range(5):
            assert http.get("/").status_code == 200
        started = time.monotonic()
        sixth = http.get("/")  # a would-be refusal: admitted, with a retry time of ~60 s
        assert sixth.status_code == 200
        assert time.monotonic() - started < 30, "the middleware held the request for the retry time"
    assert r.policy_stats("shadow5")["shadow_limited"] == 1


def test_the_address_rule_is_the_shared_one() -> None:
    for address, tenant in LAYOUT["addresses"]:
        assert address_key(address, LAYOUT["ipv6_subnet"]) == tenant, address
    assert address_key("2001:db8:1234:5678::1", 64) == "2001:db8:1234:5678::/64"
    assert address_key("2001:db8:1234:5678::1", None) == "2001:db8:1234:5678::1"
    for bad in (0, 129, True, 1.5):
        with pytest.raises(ValueError):
            address_key("::1", bad)  # type: ignore[arg-type]


def test_the_default_key_is_ratelimit_and_the_tenant(r: RateLimit, server: Server, raw: redis.Redis) -> None:
    r.set_policy("free", Period(100, "1m"))
    r.set_policy("pro", Period(1000, "1m"))
    app = _app(server.port, policy="free")
    for address, tenant in LAYOUT["addresses"]:
        with TestClient(app, client=(address, 50000)) as http:
            assert http.get("/").status_code == 200, address
        assert raw.exists(LAYOUT["prefix"] + tenant), f"{address} -> {LAYOUT['prefix']}{tenant}"
    # A key function's tenant keeps its key, and its counter, when it changes tier.
    for policy in ("free", "pro"):
        with TestClient(_app(server.port, policy=policy, key=lambda request: "t1")) as http:
            assert http.get("/").status_code == 200
    info = r.limiter_info("ratelimit:t1")
    assert info is not None and info["used"] == 2
    assert raw.keys("rl:policy:*") == []


def _policy_header(app: Starlette) -> Tuple[str, str]:
    with TestClient(app) as http:
        reply = http.get("/")
        return reply.headers["ratelimit-policy"], http.get("/").headers["ratelimit-policy"]


def test_rate_limit_policy_carries_w_for_server_policies(r: RateLimit, server: Server, raw: redis.Redis) -> None:
    cases: List[Tuple[str, Any, str]] = [
        ("w-period", Period(5, "1m"), '"w-period";q=5;w=60'),
        ("w-slide", Slide(7, "90s"), '"w-slide";q=7;w=90'),
        ("w-token", Token(10, 1, "1s"), '"w-token";q=10;w=10'),
        ("w-leaky", Leaky(6, 3, "1s", nodelay=True), '"w-leaky";q=6;w=2'),
    ]
    for name, limit, expected in cases:
        r.set_policy(name, limit)
        gets = int(raw.info("commandstats").get("cmdstat_rl.policy|get", {}).get("calls", 0))
        assert _policy_header(_app(server.port, policy=name, key=lambda request: "w")) == (expected, expected)
        after = int(raw.info("commandstats").get("cmdstat_rl.policy|get", {}).get("calls", 0))
        assert after - gets == 1, f"{name}: one RL.POLICY GET for two requests"
    # The same header as the limit of the middleware's own, and none for another quota's override.
    r.set_policy("same", Period(5, "1m"))
    r.set_policy("same", Period(50, "1h"), for_key="ratelimit:big")
    own = _policy_header(_app(server.port, limit=Period(5, "1m"), policy="same", prefix="own:"))
    assert _policy_header(_app(server.port, policy="same", key=lambda request: "small")) == own
    assert _policy_header(_app(server.port, policy="same", key=lambda request: "big"))[0] == '"same";q=50'


def test_yes_no_options_take_true_or_false_only(r: RateLimit, server: Server, raw: redis.Redis) -> None:
    r.set_policy("live", Period(3, "1m"))
    before = calls(raw)
    for shadow in ("yes", "no", 1, 0, "true", None):
        with pytest.raises(TypeError, match="shadow"):
            r.set_policy("live", Period(999, "1m"), shadow=shadow)  # type: ignore[arg-type]
    with pytest.raises(TypeError, match="clear"):
        r.set_policy("live", Period(999, "1m"), ban="1m", clear="yes")  # type: ignore[arg-type]
    with pytest.raises(TypeError, match="dryrun"):
        r.period("flags", 1, "1m", dryrun="yes")  # type: ignore[arg-type]
    with pytest.raises(TypeError, match="step"):
        Token(1, 1, "1s", step="yes")  # type: ignore[arg-type]
    with pytest.raises(TypeError, match="nodelay"):
        Leaky(1, 1, "1s", nodelay=1)  # type: ignore[arg-type]
    with pytest.raises(TypeError, match="fail_open"):
        RateLimitMiddleware(Starlette(), client=AsyncRateLimit(port=server.port), limit=Period(1, "1m"), fail_open="no")  # type: ignore[arg-type]
    assert calls(raw) == before, "nothing was sent"
    policy = r.get_policy("live")
    assert policy is not None and (policy["limit"], policy["shadow"]) == (3, 0)


def test_a_failure_is_logged_with_its_cause(r: RateLimit, caplog: pytest.LogCaptureFixture) -> None:
    down = Server()
    port = down.port
    app = _app(port, limit=Period(100, "1m"))
    unknown = _app(port, policy="nosuchpolicy")
    caplog.set_level(logging.WARNING, logger="redis_ratelimit")
    with TestClient(unknown) as http:
        assert http.get("/").status_code == 503
    assert "nosuchpolicy" in caplog.text, "the server's error names the unknown policy"
    down.stop()
    caplog.clear()
    with TestClient(app) as http:
        assert http.get("/").status_code == 503
    assert [rec.levelname for rec in caplog.records] == ["WARNING"]
    # redis-py may still be retrying the refused connection when the timeout comes: either names it
    assert ("ConnectionError" in caplog.text or "no reply from Redis within 0.5 s" in caplog.text) and (
        "answered 503" in caplog.text
    )


def _restart(server: Server) -> None:
    """Stops ``server`` and starts the same one on its port again (the port stays ours: a
    server we started and stopped; refused connections in between are what a restart is)."""
    server.process.send_signal(signal.SIGTERM)
    server.process.wait(10)
    import subprocess

    server.process = subprocess.Popen(
        [SERVER, "--port", str(server.port), "--bind", "127.0.0.1", "--save", "", "--appendonly", "no"]
        + ["--dir", server.dir, "--loadmodule", str(MODULE)],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    deadline = time.monotonic() + 20
    while True:
        try:
            if redis.Redis(port=server.port, socket_timeout=1).ping():
                return
        except redis.ConnectionError:
            pass
        assert server.process.poll() is None and time.monotonic() < deadline, "the server did not come back"
        time.sleep(0.02)


@pytest.mark.parametrize("retries", ["redis-py's default", "none"])
def test_a_redis_restart_costs_no_request_once_it_is_back(retries: str, caplog: pytest.LogCaptureFixture) -> None:
    # Issue 31, defect 7: several pooled connections (concurrent requests), then a restart. A
    # client without retries (redis-py before 6, or retry=Retry(NoBackoff(), 0)) found each
    # stale connection dead on its first call: one 503 per pooled connection. The middleware
    # sends such a call once more on a new connection; nothing is logged at warning.
    import asyncio

    import httpx2
    from redis.backoff import NoBackoff
    from redis.retry import Retry

    server = Server()
    try:
        options: Dict[str, Any] = {} if retries != "none" else {"retry": Retry(NoBackoff(), 0)}
        app = Starlette(routes=[Route("/", _hello)])
        client = AsyncRateLimit(port=server.port, **options)
        app.add_middleware(RateLimitMiddleware, client=client, limit=Period(1000, "1m"), key=lambda r: "restart")

        async def run() -> List[int]:
            transport = httpx2.ASGITransport(app=app)
            async with httpx2.AsyncClient(transport=transport, base_url="http://app") as http:
                first = await asyncio.gather(*(http.get("/") for _ in range(8)))
                assert [reply.status_code for reply in first] == [200] * 8
                _restart(server)
                caplog.set_level(logging.WARNING, logger="redis_ratelimit")
                return [(await http.get("/")).status_code for _ in range(12)]

        assert asyncio.run(run()) == [200] * 12
        assert caplog.text == ""
    finally:
        server.stop()


async def _hello(request: Request) -> PlainTextResponse:
    return PlainTextResponse("hello")


def test_calls_queued_behind_a_paused_server_count_nothing_once_answered() -> None:
    # Issue 31, defect 8: each call carries DEADLINE now + timeout; requests answered 503 while
    # the server was paused are not charged when it resumes and runs their queued calls.
    import os

    server = Server()
    try:
        admin = RateLimit(port=server.port)
        admin.set_policy("stall", Period(300, "1m"))
        app = _app(server.port, policy="stall", key=lambda request: "t-stall", timeout=0.2)
        with TestClient(app) as http:
            assert http.get("/").status_code == 200
            os.kill(server.process.pid, signal.SIGSTOP)
            try:
                assert [http.get("/").status_code for _ in range(5)] == [503] * 5
            finally:
                os.kill(server.process.pid, signal.SIGCONT)
        # The stalled call written before the pause's first timeout is run when the server resumes
        # (redis-py drops a connection whose call timed out; the next ones wait on new connections'
        # handshakes, never sent). It is refused: DEADLINE, nothing counted.
        deadline = time.monotonic() + 10
        while int(admin.info("ratelimit")["ratelimit_hit_calls"]) < 2:
            assert time.monotonic() < deadline, {k: v for k, v in admin.info("ratelimit").items() if "hit" in k}
            time.sleep(0.05)
        time.sleep(0.5)
        stats = admin.info("ratelimit")
        assert int(stats["ratelimit_hit_errors"]) == int(stats["ratelimit_hit_calls"]) - 1, "refused: DEADLINE"
        info = admin.limiter_info("ratelimit:t-stall")
        assert info is not None and info["used"] == 1, "the answered requests were not charged"
        assert admin.policy_stats("stall")["admitted"] == 1
        with pytest.raises(redis.ResponseError, match="^DEADLINE"):
            admin.hit("stall", "k", deadline=int(time.time() * 1000) - 1000)
        with pytest.raises(redis.ResponseError, match="^DEADLINE"):
            admin.token("ratelimit:k", 1, 1, "1s", deadline=int(time.time() * 1000) - 1000)
        assert not admin.exists("ratelimit:k")
        admin.close()
    finally:
        server.stop()
