"""Regression suite: the middleware the way FastAPI/Starlette apps are written and tested (issue
23, "Middleware and tests", "Slow failures"): one client across several ``TestClient``s (event
loops), leaky-bucket delay mode, ``bytes`` keys, and a Redis that is stopped or hung answered
within the timeout, fail closed (503) or fail open."""

from __future__ import annotations

import os
import signal
import time
from typing import Iterator

import pytest
import redis
import redis.asyncio
from conftest import Server
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import PlainTextResponse
from starlette.routing import Route
from starlette.testclient import TestClient

from redis_ratelimit import AsyncRateLimit, Leaky, Limit, Period
from redis_ratelimit.middleware import RateLimitMiddleware


def _app(client: object, limit: Limit, **options: object) -> Starlette:
    async def hello(request: Request) -> PlainTextResponse:
        return PlainTextResponse("hello")

    app = Starlette(routes=[Route("/", hello)])
    app.add_middleware(RateLimitMiddleware, client=client, limit=limit, **options)  # type: ignore[arg-type]
    return app


def test_one_client_survives_a_second_test_client(server: Server, raw: redis.Redis) -> None:
    app = _app(AsyncRateLimit(port=server.port), Period(3, "1m"))
    with TestClient(app) as http:
        assert http.get("/").status_code == 200
    with TestClient(app) as http:  # a new event loop: "Event loop is closed" before
        assert http.get("/").status_code == 200
    http = TestClient(app)  # without `with`: a loop per request
    assert http.get("/").status_code == 200
    assert http.get("/").status_code == 429


def test_a_plain_redis_asyncio_client_is_taken(server: Server, raw: redis.Redis) -> None:
    app = _app(redis.asyncio.Redis(port=server.port), Period(1, "1m"))
    with TestClient(app) as http:
        assert [http.get("/").status_code for _ in range(2)] == [200, 429]


def test_a_sync_client_is_refused() -> None:
    with pytest.raises(TypeError, match="asyncio client"):
        RateLimitMiddleware(_app(None, Period(1, "1m")), client=redis.Redis(), limit=Period(1, "1m"))  # type: ignore[arg-type]


def test_leaky_delay_mode_delays_admitted_requests(server: Server, raw: redis.Redis) -> None:
    app = _app(AsyncRateLimit(port=server.port), Leaky(10, 5, "1s"))  # 5/s out: 200 ms apart
    with TestClient(app) as http:
        started = time.monotonic()
        assert [http.get("/").status_code for _ in range(4)] == [200] * 4
        assert time.monotonic() - started >= 0.55  # 3 × 200 ms of water ahead, less the time taken
    metered = _app(AsyncRateLimit(port=server.port), Leaky(10, 5, "1s", nodelay=True), prefix="meter:")
    with TestClient(metered) as http:
        assert [http.get("/").status_code for _ in range(4)] == [200] * 4


def test_a_bytes_key_is_used_as_is(server: Server, raw: redis.Redis) -> None:
    app = _app(AsyncRateLimit(port=server.port), Period(1, "1m"), key=lambda request: b"k\xff")
    with TestClient(app) as http:
        assert http.get("/").status_code == 200
    assert raw.exists(b"ratelimit:k\xff") and not raw.keys("ratelimit:b'*")


@pytest.fixture
def doomed() -> Iterator[Server]:
    """A server of this test's own, to stop or freeze."""
    s = Server()
    yield s
    if s.process.poll() is None:
        os.kill(s.process.pid, signal.SIGCONT)
    s.stop()


def _answers(app: Starlette) -> tuple[int, float]:
    with TestClient(app) as http:
        started = time.monotonic()
        status = http.get("/").status_code
        return status, time.monotonic() - started


@pytest.mark.parametrize("how", ["stopped", "hung"])
@pytest.mark.parametrize("fail_open", [False, True])
def test_a_redis_down_or_hung_is_answered_fast(doomed: Server, how: str, fail_open: bool) -> None:
    client = AsyncRateLimit(port=doomed.port)  # the README's client: no timeouts of its own
    app = _app(client, Period(100, "1m"), fail_open=fail_open)
    assert _answers(app)[0] == 200
    if how == "stopped":
        doomed.stop()
    else:
        os.kill(doomed.process.pid, signal.SIGSTOP)
    status, took = _answers(app)
    assert status == (200 if fail_open else 503)
    assert took < 5  # 4–58 s before; the default timeout is 0.5 s


def test_the_timeout_is_an_option(doomed: Server) -> None:
    os.kill(doomed.process.pid, signal.SIGSTOP)
    app = _app(AsyncRateLimit(port=doomed.port), Period(1, "1m"), timeout=0.05)
    assert _answers(app)[0] == 503
    with pytest.raises(ValueError, match="timeout"):
        RateLimitMiddleware(app, client=AsyncRateLimit(), limit=Period(1, "1m"), timeout=0)
