"""The asyncio client, and the cluster clients (sync and asyncio) on a real 3-master cluster."""

from __future__ import annotations

from typing import List

import pytest
import redis
from conftest import Server, calls

from redis_ratelimit import (
    AsyncRateLimit,
    AsyncRateLimitCluster,
    Decision,
    ModuleNotLoadedError,
    Period,
    RateLimitCluster,
    Slide,
    Token,
)

T0 = 4_000_000_000_000


async def test_async_methods(server: Server, raw: redis.Redis) -> None:
    r = AsyncRateLimit(port=server.port)
    assert await r.token("t", 2, 1, "1s", at=T0) == Decision(True, 2, 1, 0, 1000)
    assert await r.period("p", 1, "1m", at=T0) == Decision(True, 1, 0, 0, 60_000)
    assert (await r.period("p", 1, "1m", at=T0 + 10)).retry_after_ms == 59_990
    assert (await r.slide("s", 3, "1m", cost=3, at=T0)).remaining == 0
    assert (await r.leaky("k", 3, 1, "1s", at=T0)).allowed
    assert (await r.throttle("g", 0, 1, 1, at=T0)).limit == 1
    both = await r.all({"{a}1": Token(1, 1, "1s"), "{a}2": Slide(5, "1s")}, at=T0)
    assert both.allowed and both.index == 0
    lease = await r.acquire("l", 1, "1m", at=T0)
    assert lease.allowed and lease.id is not None
    assert await r.release("l", lease.id, at=T0)
    refunded = await r.refund("t", 1, at=T0)
    assert refunded is not None and refunded.remaining == 1
    assert await r.peek("t") is None  # refunded back to a fresh bucket: deleted
    charged = await r.charge("g", 2, at=T0)  # one permit per second, all used: 2 s of debt
    assert charged is not None and not charged.allowed and charged.retry_after_ms == 3000
    assert await r.charge("t", 1) is None
    info = await r.limiter_info("p")
    assert info is not None and info["algorithm"] == "period" and info["used"] == 1
    before = calls(raw)
    await r.apply("x", Period(5, "1m"))
    assert calls(raw) - before == 1
    await r.aclose()


async def test_async_without_the_module(plain_server: Server) -> None:
    r = AsyncRateLimit(port=plain_server.port)
    with pytest.raises(ModuleNotLoadedError, match="MODULE LOAD"):
        await r.slide("s", 1, "1s")
    with pytest.raises(redis.ResponseError, match="wrong number of arguments"):
        await r.execute_command("GET")
    await r.aclose()


def _users_on_every_master(nodes: List[Server]) -> List[str]:
    """Hash tags whose slots fall on each of the masters."""
    c = redis.Redis(port=nodes[0].port)
    owners = {}
    for i in range(200):
        tag = f"user{i}"
        slot = int(c.execute_command("CLUSTER", "KEYSLOT", tag))
        owners.setdefault(slot // 5462, tag)
    return list(owners.values())


def test_cluster_client_routes_by_key(cluster: List[Server]) -> None:
    r = RateLimitCluster(host="127.0.0.1", port=cluster[0].port)
    tags = _users_on_every_master(cluster)
    assert len(tags) == 3
    for tag in tags:
        for i in range(3):
            assert r.token(f"{{{tag}}}:api", 2, 1, "1m").allowed == (i < 2)
        d = r.all({f"{{{tag}}}:s": Token(10, 10, "1s"), f"{{{tag}}}:d": Period(2, "1d")})
        assert d.allowed and d.index == 1
        assert r.peek(f"{{{tag}}}:api") is not None
        info = r.limiter_info(f"{{{tag}}}:d")
        assert info is not None and info["used"] == 1
        lease = r.acquire(f"{{{tag}}}:lease", 1, "1m")
        assert lease.id is not None and r.release(f"{{{tag}}}:lease", lease.id)
    with pytest.raises(redis.RedisClusterException):
        r.all({f"{{{tags[0]}}}:a": Token(1, 1, "1s"), f"{{{tags[1]}}}:a": Token(1, 1, "1s")})
    r.close()


async def test_async_cluster_client_routes_by_key(cluster: List[Server]) -> None:
    r = AsyncRateLimitCluster(host="127.0.0.1", port=cluster[0].port)
    for tag in _users_on_every_master(cluster):
        assert (await r.slide(f"{{{tag}}}:async", 1, "1m")).allowed
        assert not (await r.slide(f"{{{tag}}}:async", 1, "1m")).allowed
        d = await r.all([(f"{{{tag}}}:as", Token(10, 10, "1s")), (f"{{{tag}}}:ad", Period(2, "1d"))])
        assert d.allowed
    await r.aclose()
