"""Policies (issue 24): limits the server holds by name, from the sync and asyncio clients —
``hit`` (RL.HIT), ``set_policy`` / ``get_policy`` / ``delete_policy`` / ``policies`` /
``policy_stats`` (RL.POLICY), on every primary of a cluster client — and
``RateLimitMiddleware(policy=...)``."""

from __future__ import annotations

from typing import List

import pytest
import redis
from conftest import Server
from redis.exceptions import ResponseError
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import PlainTextResponse
from starlette.routing import Route
from starlette.testclient import TestClient

from redis_ratelimit import AsyncRateLimit, AsyncRateLimitCluster, Period, RateLimit, RateLimitCluster, Slide, Token
from redis_ratelimit.middleware import RateLimitMiddleware


@pytest.fixture
def r(server: Server, raw: redis.Redis) -> RateLimit:
    rl = RateLimit(port=server.port)
    for name in rl.policies():
        rl.delete_policy(name)
    return rl


def test_a_policy_is_the_limit_of_hit(r: RateLimit) -> None:
    r.set_policy("free", Period(2, "1m"))
    r.set_policy("free", Period(5, "1m"), for_key="tenant:vip")  # an override
    assert [r.hit("free", "tenant:a").allowed for _ in range(3)] == [True, True, False]
    assert r.hit("free", "tenant:vip").limit == 5
    assert r.hit("free", "tenant:b", cost=2).remaining == 0
    assert r.hit("free", "tenant:c", dryrun=True).remaining == 1 and r.peek("tenant:c") is None
    policy = r.get_policy("free")
    assert policy is not None and policy["algorithm"] == "period" and policy["limit"] == 2
    override = r.get_policy("free", for_key="tenant:vip")
    assert override is not None and override["limit"] == 5
    assert r.get_policy("free", for_key="tenant:a") is None and r.get_policy("absent") is None
    assert r.policies() == ["free"]
    stats = r.policy_stats("free")
    assert stats["calls"] == 6 and stats["limited"] == 1  # the dry run counts too
    with pytest.raises(ResponseError, match="absent"):
        r.hit("absent", "k")
    assert r.delete_policy("free", for_key="tenant:vip") and r.delete_policy("free")
    assert not r.delete_policy("free") and r.policies() == []


def test_ban_shadow_and_every_algorithm(r: RateLimit) -> None:
    r.set_policy("login", Slide(1, "1m"), ban="10m", clear=True)
    assert r.hit("login", "u").allowed and not r.hit("login", "u").allowed
    r.set_policy("trial", Token(1, 1, "1m"), shadow=True)
    r.hit("trial", "u")
    shadowed = r.hit("trial", "u")
    assert shadowed.allowed and shadowed.retry_after_ms != 0  # would have been limited
    info = r.get_policy("trial")
    assert info is not None and info["shadow"] == 1
    with pytest.raises(ValueError, match="ban"):
        r.set_policy("x", Token(1, 1, "1s"), clear=True)


async def test_the_asyncio_client(server: Server, raw: redis.Redis) -> None:
    r = AsyncRateLimit(port=server.port)
    await r.set_policy("api", Token(1, 1, "1m"))
    assert (await r.hit("api", "k")).allowed and not (await r.hit("api", "k")).allowed
    assert "api" in await r.policies() and (await r.policy_stats("api"))["limited"] == 1
    assert (await r.get_policy("api") or {})["capacity"] == 1
    assert await r.delete_policy("api")
    await r.aclose()


def test_a_cluster_client_writes_to_every_primary(cluster: List[Server]) -> None:
    r = RateLimitCluster(host="127.0.0.1", port=cluster[0].port)
    r.set_policy("tier", Period(1, "1m"))
    for node in cluster:  # each node's own table
        assert redis.Redis(port=node.port).execute_command("RL.POLICY", "LIST") == [b"tier"]
    for n in range(12):  # keys on every master
        assert r.hit("tier", f"user:{n}").allowed
    assert r.policies() == ["tier"] and r.policy_stats("tier")["calls"] == 12  # summed
    assert r.delete_policy("tier") and r.policies() == []


async def test_an_asyncio_cluster_client_writes_to_every_primary(cluster: List[Server]) -> None:
    r = AsyncRateLimitCluster(host="127.0.0.1", port=cluster[0].port)
    await r.set_policy("atier", Period(1, "1m"))
    for node in cluster:
        assert b"atier" in redis.Redis(port=node.port).execute_command("RL.POLICY", "LIST")
    assert (await r.hit("atier", "k1")).allowed
    assert await r.delete_policy("atier") and await r.policies() == []
    await r.aclose()


def test_the_middleware_takes_its_limit_from_a_policy(r: RateLimit, server: Server) -> None:
    async def hello(request: Request) -> PlainTextResponse:
        return PlainTextResponse("hello")

    app = Starlette(routes=[Route("/", hello)])
    app.add_middleware(RateLimitMiddleware, client=AsyncRateLimit(port=server.port), policy="web")
    r.set_policy("web", Period(1, "1m"))
    with TestClient(app) as http:
        first = http.get("/")
        assert first.status_code == 200 and first.headers["ratelimit-policy"] == '"web";q=1;w=60'
        assert http.get("/").status_code == 429
        r.set_policy("web", Period(3, "1m"))  # live, without a deploy
        assert http.get("/").status_code == 200
    with pytest.raises(TypeError, match="a limit, or a policy"):
        RateLimitMiddleware(app, client=AsyncRateLimit(port=server.port))
