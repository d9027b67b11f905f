"""Decision.headers() (draft-ietf-httpapi-ratelimit-headers-10) and the ASGI middleware over
real HTTP handling (Starlette's test client) and a real server."""

from __future__ import annotations

from typing import Optional

import redis
from conftest import Server, free_port
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import PlainTextResponse
from starlette.routing import Route
from starlette.testclient import TestClient

from redis_ratelimit import AsyncRateLimit, Decision, Period, Token
from redis_ratelimit.middleware import RateLimitMiddleware


def test_headers_of_an_admitted_request() -> None:
    d = Decision(True, 100, 42, 0, 16_001)
    assert d.headers() == {"RateLimit-Policy": '"default";q=100', "RateLimit": '"default";r=42;t=17'}
    assert d.headers("per-key", 60)["RateLimit-Policy"] == '"per-key";q=100;w=60'


def test_headers_of_a_refused_request() -> None:
    d = Decision(False, 10, 0, 1, 59_000)
    assert d.headers()["Retry-After"] == "1"  # 1 ms rounds up to a whole second
    assert Decision(False, 10, 0, 60_000, 60_000).headers()["Retry-After"] == "60"
    never = Decision(False, 10, 0, -1, 0).headers()
    assert "Retry-After" not in never and never["RateLimit"] == '"default";r=0;t=0'
    assert Decision(True, 1, 1, 0, 0).headers('a"b')["RateLimit"].startswith('"a\\"b";')


def _app(server: Server, **options: object) -> Starlette:
    async def hello(request: Request) -> PlainTextResponse:
        return PlainTextResponse("hello")

    app = Starlette(routes=[Route("/", hello), Route("/health", hello)])
    client = AsyncRateLimit(port=server.port)
    app.add_middleware(RateLimitMiddleware, client=client, **options)  # type: ignore[arg-type]
    return app


def test_middleware_admits_then_refuses_with_429(server: Server, raw: redis.Redis) -> None:
    app = _app(server, limit=Period(2, "1m"), key=lambda request: request.headers.get("x-api-key"))
    with TestClient(app) as http:
        first = http.get("/", headers={"x-api-key": "k1"})
        assert first.status_code == 200 and first.text == "hello"
        assert first.headers["ratelimit-policy"] == '"default";q=2;w=60'
        assert first.headers["ratelimit"] == '"default";r=1;t=60'
        assert http.get("/", headers={"x-api-key": "k1"}).status_code == 200
        refused = http.get("/", headers={"x-api-key": "k1"})
        assert refused.status_code == 429
        assert refused.headers["retry-after"] == "60"
        assert refused.headers["ratelimit"] == '"default";r=0;t=60'
        assert refused.json()["error"] == "too many requests"
        assert http.get("/", headers={"x-api-key": "k2"}).status_code == 200  # its own key
        for _ in range(5):  # no key: not limited
            assert http.get("/health").status_code == 200
    assert raw.exists("ratelimit:k1") and not raw.exists("ratelimit:None")


def test_middleware_async_key_and_cost(server: Server, raw: redis.Redis) -> None:
    async def key(request: Request) -> Optional[str]:
        return "tenant-" + request.query_params.get("t", "none")

    async def cost(request: Request) -> int:
        return int(request.query_params.get("cost", "1"))

    app = _app(server, limit=Token(10, 1, "1s"), key=key, cost=cost, prefix="api:", policy="bytes")
    with TestClient(app) as http:
        ok = http.get("/?t=a&cost=7")
        assert ok.status_code == 200 and ok.headers["ratelimit"].startswith('"bytes";r=3;')
        assert ok.headers["ratelimit-policy"] == '"bytes";q=10;w=10'  # a full bucket refills in 10 s
        refused = http.get("/?t=a&cost=4")
        assert refused.status_code == 429 and refused.headers["retry-after"] == "1"
        never = http.get("/?t=b&cost=11")
        assert never.status_code == 429 and "retry-after" not in never.headers
    assert raw.exists("api:tenant-a")


def test_middleware_default_key_is_the_client_address(server: Server, raw: redis.Redis) -> None:
    app = _app(server, limit=Period(1, "1m"))
    with TestClient(app) as http:
        assert http.get("/").status_code == 200
        assert http.get("/").status_code == 429
    assert raw.exists("ratelimit:testclient")


def test_middleware_when_redis_is_down() -> None:
    down = Server.__new__(Server)
    down.port = free_port()  # nobody listens there
    closed = _app(down, limit=Period(1, "1m"))
    with TestClient(closed) as http:
        refused = http.get("/")
        assert refused.status_code == 503 and refused.headers["retry-after"] == "1"
    open_ = _app(down, limit=Period(1, "1m"), fail_open=True)
    with TestClient(open_) as http:
        for _ in range(3):
            reply = http.get("/")
            assert reply.status_code == 200 and "ratelimit" not in reply.headers
