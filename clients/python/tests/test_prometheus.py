"""RateLimitCollector (issue 25): after known traffic against real servers, the registry's text
format holds exactly the module's counters (INFO ratelimit), RL.TOP's keys when asked for, and
the middleware's own decisions; one INFO per node per scrape; a cluster adds up its primaries;
a server that does not answer gives ratelimit_up 0."""

from __future__ import annotations

import asyncio
import os
import signal
import time
from typing import Dict, Iterator, List

import pytest
import redis
import redis.asyncio
import redis.asyncio.cluster
import redis.cluster
from conftest import Server
from prometheus_client import CollectorRegistry, generate_latest
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import PlainTextResponse
from starlette.routing import Route
from starlette.testclient import TestClient

from redis_ratelimit import AsyncRateLimit, Period, RateLimit
from redis_ratelimit.middleware import RateLimitMiddleware
from redis_ratelimit.prometheus import DEFAULT_TIMEOUT_S, AsyncRateLimitCollector, RateLimitCollector


def samples(registry: CollectorRegistry) -> Dict[str, float]:
    """The sample lines of the registry's text format, as ``{'name{labels}': value}``."""
    out: Dict[str, float] = {}
    for line in generate_latest(registry).decode().splitlines():
        if line and not line.startswith("#"):
            name, _, value = line.rpartition(" ")
            out[name] = float(value)
    return out


def info_calls(r: redis.Redis) -> int:
    return int(r.info("commandstats").get("cmdstat_info", {}).get("calls", 0))


@pytest.fixture
def own_server() -> Iterator[Server]:
    """A server of this test's own: the module's INFO counters count from zero (CONFIG
    RESETSTAT does not reset them), whatever the session's other tests sent before."""
    s = Server()
    yield s
    s.stop()


def test_exact_counters_top_keys_and_middleware(own_server: Server) -> None:
    server = own_server
    raw = redis.Redis(port=server.port)
    registry = CollectorRegistry()
    registry.register(RateLimitCollector(RateLimit(port=server.port), top_keys=2))
    for _ in range(3):
        raw.execute_command("RL.TOKEN", "a", 1, 1, "1h")  # 1 admitted, 2 limited
    for _ in range(4):
        raw.execute_command("RL.PERIOD", "c", 1, "1h")  # 1, 3
    raw.execute_command("RL.PERIOD", b"\xffbin", 1, "1h")
    raw.execute_command("RL.PERIOD", b"\xffbin", 1, "1h")
    with pytest.raises(redis.ResponseError):
        raw.execute_command("RL.TOKEN", "a", "x", 1, "1h")

    async def hello(request: Request) -> PlainTextResponse:
        return PlainTextResponse("hello")

    app = Starlette(routes=[Route("/", hello)])
    app.add_middleware(
        RateLimitMiddleware,
        client=AsyncRateLimit(port=server.port),  # type: ignore[arg-type]
        limit=Period(1, "1m"),
        policy="prom-test",
    )
    with TestClient(app) as http:
        assert [http.get("/").status_code for _ in range(2)] == [200, 429]

    s = samples(registry)
    assert s["ratelimit_up"] == 1
    assert s['ratelimit_decisions_total{command="token",outcome="admitted"}'] == 1
    assert s['ratelimit_decisions_total{command="token",outcome="limited"}'] == 2
    # The middleware's two calls are RL.PERIOD calls too.
    assert s['ratelimit_decisions_total{command="period",outcome="admitted"}'] == 3
    assert s['ratelimit_decisions_total{command="period",outcome="limited"}'] == 5
    assert s['ratelimit_decisions_total{command="slide",outcome="limited"}'] == 0
    assert 'ratelimit_decisions_total{command="peek",outcome="admitted"}' not in s
    assert s['ratelimit_calls_total{command="token"}'] == 4
    assert s['ratelimit_errors_total{command="token"}'] == 1
    assert s["ratelimit_waiting"] == 0
    assert s["ratelimit_top_refusals"] == 7
    assert s["ratelimit_top_error_bound"] == 0
    top = {k: v for k, v in s.items() if k.startswith("ratelimit_top_key_refused")}
    assert top == {'ratelimit_top_key_refused{key="c"}': 3, 'ratelimit_top_key_refused{key="a"}': 2}
    assert s['ratelimit_middleware_decisions_total{outcome="admitted",policy="prom-test"}'] == 1
    assert s['ratelimit_middleware_decisions_total{outcome="limited",policy="prom-test"}'] == 1
    assert s['ratelimit_middleware_decisions_total{outcome="error",policy="prom-test"}'] == 0
    # Counters follow the traffic; one INFO per scrape (the reading of `before` is one too).
    raw.execute_command("RL.TOKEN", "a", 1, 1, "1h")
    before = info_calls(raw)
    assert samples(registry)['ratelimit_decisions_total{command="token",outcome="limited"}'] == 3
    assert info_calls(raw) - before == 2


def test_binary_keys_and_no_top_keys_by_default(server: Server, raw: redis.Redis) -> None:
    raw.execute_command("RL.TOP", "RESET")
    for _ in range(3):
        raw.execute_command("RL.TOKEN", b"\xffk\x00", 1, 1, "1h")
    with_keys = CollectorRegistry()
    with_keys.register(RateLimitCollector(redis.Redis(port=server.port), top_keys=5))
    assert samples(with_keys)['ratelimit_top_key_refused{key="\ufffdk\x00"}'] == 2
    plain = CollectorRegistry()
    plain.register(RateLimitCollector(redis.Redis(port=server.port, decode_responses=True)))
    s = samples(plain)
    assert s["ratelimit_up"] == 1 and s["ratelimit_top_refusals"] == 2
    assert not [k for k in s if k.startswith("ratelimit_top_key")]


def test_bad_arguments() -> None:
    for top_keys in (-1, 101, True, 1.5):
        with pytest.raises(ValueError):
            RateLimitCollector(redis.Redis(), top_keys=top_keys)  # type: ignore[arg-type]
    with pytest.raises(TypeError):
        RateLimitCollector(object())  # type: ignore[arg-type]
    # Registering asks Redis nothing (describe), and twice in one registry is refused.
    registry = CollectorRegistry()
    registry.register(RateLimitCollector(redis.Redis(port=1)))
    with pytest.raises(ValueError):
        registry.register(RateLimitCollector(redis.Redis(port=1)))


def test_a_server_that_does_not_answer() -> None:
    server = Server()
    client = redis.Redis(port=server.port, socket_timeout=1)
    registry = CollectorRegistry()
    registry.register(RateLimitCollector(client))
    assert samples(registry)["ratelimit_up"] == 1
    server.stop()
    s = samples(registry)
    assert s["ratelimit_up"] == 0
    assert not [k for k in s if k.startswith("ratelimit_decisions_total")]


def test_a_cluster_adds_up_its_primaries(cluster: List[Server]) -> None:
    rc = redis.cluster.RedisCluster(host="127.0.0.1", port=cluster[0].port)
    for node in cluster:
        redis.Redis(port=node.port).execute_command("RL.TOP", "RESET")
    before_calls = {n.port: redis.Redis(port=n.port).info("ratelimit") for n in cluster}
    keys = ["a", "b", "c", "d", "e", "f"]
    for key in keys:
        for _ in range(2):  # admitted, then refused
            rc.execute_command("RL.TOKEN", f"prom:{key}", 1, 1, "1h")
    registry = CollectorRegistry()
    registry.register(RateLimitCollector(rc, top_keys=10))
    before = [info_calls(redis.Redis(port=n.port)) for n in cluster]
    s = samples(registry)
    after = [info_calls(redis.Redis(port=n.port)) for n in cluster]
    assert [a - b for a, b in zip(after, before)] == [2, 2, 2]  # one INFO each (and the reading)
    admitted = sum(int(i.get("ratelimit_token_admitted", 0)) for i in before_calls.values())
    limited = sum(int(i.get("ratelimit_token_limited", 0)) for i in before_calls.values())
    assert s['ratelimit_decisions_total{command="token",outcome="admitted"}'] == admitted + 6
    assert s['ratelimit_decisions_total{command="token",outcome="limited"}'] == limited + 6
    assert s["ratelimit_top_refusals"] == 6
    for key in keys:
        assert s[f'ratelimit_top_key_refused{{key="prom:{key}"}}'] == 1
    rc.close()


def test_a_paused_server_answers_up_0_within_the_timeout(own_server: Server) -> None:
    # Issue 31, defect 6 (both packages): Redis paused (SIGSTOP) — a scrape answers within the
    # collector's timeout, ratelimit_up 0, well before Prometheus' 10 s; later scrapes do too
    # without queueing more commands behind the late one; it recovers when the server does.
    assert DEFAULT_TIMEOUT_S == 5.0
    registry = CollectorRegistry()
    registry.register(RateLimitCollector(redis.Redis(port=own_server.port), timeout=0.5))
    assert samples(registry)["ratelimit_up"] == 1
    os.kill(own_server.process.pid, signal.SIGSTOP)
    try:
        for _ in range(3):
            started = time.monotonic()
            s = samples(registry)
            assert time.monotonic() - started < 9, "the scrape waited for the paused server"
            assert s["ratelimit_up"] == 0
            assert not [k for k in s if k.startswith("ratelimit_decisions_total")]
    finally:
        os.kill(own_server.process.pid, signal.SIGCONT)
    deadline = time.monotonic() + 10
    while samples(registry)["ratelimit_up"] != 1:
        assert time.monotonic() < deadline, "the collector did not recover"
        time.sleep(0.05)
    assert info_calls(redis.Redis(port=own_server.port)) <= 4, "one INFO for the late scrapes, not one each"
    with pytest.raises(ValueError):
        RateLimitCollector(redis.Redis(), timeout=0)


async def test_the_asyncio_collector(own_server: Server) -> None:
    # Issue 32: an asyncio app's collector — its redis.asyncio client, the same metrics.
    raw = redis.Redis(port=own_server.port)
    for _ in range(3):
        raw.execute_command("RL.TOKEN", "a", 1, 1, "1h")  # 1 admitted, 2 limited
    client = redis.asyncio.Redis(port=own_server.port)
    collector = AsyncRateLimitCollector(client, top_keys=3, timeout=0.5)
    registry = CollectorRegistry()
    registry.register(collector)
    assert samples(registry)["ratelimit_up"] == 0, "nothing read yet"
    assert await collector.refresh()
    s = samples(registry)
    assert s["ratelimit_up"] == 1
    assert s['ratelimit_decisions_total{command="token",outcome="admitted"}'] == 1
    assert s['ratelimit_decisions_total{command="token",outcome="limited"}'] == 2
    assert s['ratelimit_top_key_refused{key="a"}'] == 2
    # The sync collector says the same of the same server.
    sync = CollectorRegistry()
    sync.register(RateLimitCollector(redis.Redis(port=own_server.port), top_keys=3))
    assert {k: v for k, v in samples(sync).items() if "calls" not in k} == {
        k: v for k, v in samples(registry).items() if "calls" not in k
    }
    # Its ASGI app refreshes, then renders the registry.
    sent: List[Dict[str, object]] = []

    async def receive() -> Dict[str, object]:
        return {"type": "http.request"}

    async def send(message: Dict[str, object]) -> None:
        sent.append(message)

    raw.execute_command("RL.TOKEN", "a", 1, 1, "1h")
    await collector.asgi_app(registry)({"type": "http", "path": "/metrics"}, receive, send)
    assert sent[0]["status"] == 200
    body = sent[1]["body"]
    assert isinstance(body, bytes) and b'ratelimit_decisions_total{command="token",outcome="limited"} 3.0' in body
    # Paused: up 0 within the timeout.
    os.kill(own_server.process.pid, signal.SIGSTOP)
    try:
        started = time.monotonic()
        assert not await collector.refresh()
        assert time.monotonic() - started < 9
        assert samples(registry)["ratelimit_up"] == 0
    finally:
        os.kill(own_server.process.pid, signal.SIGCONT)
    deadline = time.monotonic() + 10
    while not await collector.refresh():
        assert time.monotonic() < deadline
        await asyncio.sleep(0.05)
    await client.aclose()
    with pytest.raises(TypeError):
        AsyncRateLimitCollector(redis.Redis())  # type: ignore[arg-type]


async def test_the_asyncio_collector_on_a_cluster(cluster: List[Server]) -> None:
    rc = redis.asyncio.cluster.RedisCluster(host="127.0.0.1", port=cluster[0].port)
    for node in cluster:
        redis.Redis(port=node.port).execute_command("RL.TOP", "RESET")
    keys = ["a", "b", "c", "d", "e", "f"]
    for key in keys:
        for _ in range(2):
            await rc.execute_command("RL.TOKEN", f"aprom:{key}", 1, 1, "1h")
    collector = AsyncRateLimitCollector(rc, top_keys=10)
    registry = CollectorRegistry()
    registry.register(collector)
    assert await collector.refresh()
    s = samples(registry)
    assert s["ratelimit_top_refusals"] == 6
    for key in keys:
        assert s[f'ratelimit_top_key_refused{{key="aprom:{key}"}}'] == 1
    await rc.aclose()


def test_policies_named_like_other_fields_and_a_candidate(own_server: Server) -> None:
    # Issue 31, defect 4 (the collectors' side): policies named entries, bytes, calls are read as
    # policies, and the RL.POLICY command's own counters stay; a candidate is exposed beside its policy.
    r = RateLimit(port=own_server.port)
    for name in ("entries", "bytes", "calls"):
        r.set_policy(name, Period(1, "1m"))
        r.hit(name, f"k-{name}")
        r.hit(name, f"k-{name}")
    r.set_policy("tier", Period(5, "1m"))
    r.execute_command("RL.POLICY", "SET", "tier", "PERIOD", 2, 60000, "CANDIDATE")
    for _ in range(3):
        assert r.hit("tier", "c").allowed
    registry = CollectorRegistry()
    registry.register(RateLimitCollector(redis.Redis(port=own_server.port)))
    s = samples(registry)
    assert s["ratelimit_up"] == 1
    for name in ("entries", "bytes", "calls"):
        assert s[f'ratelimit_policy_decisions_total{{outcome="admitted",policy="{name}"}}'] == 1, name
        assert s[f'ratelimit_policy_decisions_total{{outcome="limited",policy="{name}"}}'] == 1, name
    assert s['ratelimit_calls_total{command="policy"}'] >= 4
    assert s['ratelimit_decisions_total{command="hit",outcome="admitted"}'] == 6
    assert s['ratelimit_policy_decisions_total{outcome="admitted",policy="tier"}'] == 3
    assert s['ratelimit_policy_candidate_decisions_total{outcome="admitted",policy="tier"}'] == 2
    assert s['ratelimit_policy_candidate_decisions_total{outcome="limited",policy="tier"}'] == 1
    assert 'ratelimit_policy_candidate_decisions_total{outcome="admitted",policy="calls"}' not in s
    r.close()
