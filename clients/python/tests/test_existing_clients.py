"""Regression suite: the clients in the code applications already have (issue 23, "Existing
clients"): wrapping a redis-py client or pool (sync, asyncio, cluster), a wrong first argument
refused at construction, ``from_url`` typed as the class, ``all()`` with tuples, and ``wait=``
longer than the socket timeout refused instead of retried for a minute."""

from __future__ import annotations

import gc
import time
from typing import List

import pytest
import redis
import redis.asyncio
import redis.asyncio.cluster
import redis.cluster
from conftest import Server

from redis_ratelimit import AsyncRateLimit, AsyncRateLimitCluster, Period, RateLimit, RateLimitCluster, Token


def test_a_sync_client_and_its_pool_are_wrapped(server: Server, raw: redis.Redis) -> None:
    existing = redis.Redis(port=server.port, decode_responses=True)
    r = RateLimit(existing)
    assert r.connection_pool is existing.connection_pool
    assert r.token("k", 2, 1, "1m").remaining == 1
    assert RateLimit(existing.connection_pool).token("k", 2, 1, "1m").remaining == 0
    assert r.get("absent") is None and r.set("s", "v") and existing.get("s") == "v"  # its options
    del r
    gc.collect()
    assert existing.ping()  # dropping the wrapper leaves the application's pool open


async def test_an_asyncio_client_and_its_pool_are_wrapped(server: Server, raw: redis.Redis) -> None:
    existing = redis.asyncio.Redis(port=server.port)
    r = AsyncRateLimit(existing)
    assert r.connection_pool is existing.connection_pool
    assert (await r.period("k", 2, "1m")).remaining == 1
    assert (await AsyncRateLimit(existing.connection_pool).period("k", 2, "1m")).remaining == 0
    await existing.aclose()


def test_a_cluster_client_is_wrapped_and_left_open(cluster: List[Server]) -> None:
    existing = redis.cluster.RedisCluster(host="127.0.0.1", port=cluster[0].port)
    r = RateLimitCluster(existing)
    for n in range(10):  # keys on every master
        assert r.token(f"user:{n}", 1, 1, "1m").allowed
    assert r.all((("{u}:a", Token(1, 1, "1m")), ("{u}:b", Period(1, "1m")))).allowed
    r.close()
    del r
    gc.collect()
    assert not RateLimitCluster(existing).token("user:0", 1, 1, "1m").allowed  # still connected
    existing.close()


async def test_an_asyncio_cluster_client_is_wrapped(cluster: List[Server]) -> None:
    existing = redis.asyncio.cluster.RedisCluster(host="127.0.0.1", port=cluster[0].port)
    r = AsyncRateLimitCluster(existing)
    for n in range(10):
        assert (await r.slide(f"auser:{n}", 1, "1m")).allowed
    await r.aclose()
    assert not (await existing.execute_command("RL.SLIDE", "auser:0", 1, "1m"))[0]
    await existing.aclose()


@pytest.mark.parametrize(
    ("wrapper", "value", "hint"),
    [
        (RateLimit, 6379, "got builtins.int"),
        (RateLimit, redis.asyncio.Redis(), "wrap it with AsyncRateLimit(client)"),
        (RateLimit, redis.cluster.RedisCluster.__new__(redis.cluster.RedisCluster), "RateLimitCluster(client)"),
        (AsyncRateLimit, redis.Redis(), "wrap it with RateLimit(client)"),
        (AsyncRateLimit, redis.ConnectionPool(), "wrap it with RateLimit(client)"),
        (RateLimitCluster, redis.Redis(), "wrap it with RateLimit(client)"),
        (AsyncRateLimitCluster, [("127.0.0.1", 7000)], "got builtins.list"),
    ],
)
def test_a_wrong_first_argument_is_refused_at_construction(wrapper: type, value: object, hint: str) -> None:
    with pytest.raises(TypeError) as refused:
        wrapper(value)
    assert hint in str(refused.value) and "host=" in str(refused.value)


def test_a_wrapped_client_takes_no_other_options(server: Server) -> None:
    with pytest.raises(TypeError, match="no other arguments"):
        RateLimit(redis.Redis(port=server.port), socket_timeout=1)  # type: ignore[call-overload]


def test_from_url_is_typed_as_the_class(server: Server, raw: redis.Redis) -> None:
    r = RateLimit.from_url(server.url)
    assert type(r) is RateLimit and r.token("k", 1, 1, "1s").allowed
    assert type(AsyncRateLimit.from_url(server.url)) is AsyncRateLimit


def test_all_takes_a_tuple_of_pairs_or_one_pair(server: Server, raw: redis.Redis) -> None:
    r = RateLimit(port=server.port)
    pairs = (("{u}:s", Token(2, 1, "1s")), ("{u}:d", Period(5, "1d")))
    assert r.all(pairs).allowed
    assert r.all(list(pairs)).details[1].remaining == 3
    assert r.all(("{u}:one", Token(1, 1, "1s"))).allowed
    with pytest.raises(TypeError, match="Token, Period, Slide or Leaky"):
        r.all({"k": (Token(1, 1, "1s"), 2)})  # type: ignore[dict-item]


def test_wait_longer_than_the_socket_timeout_is_refused_at_once(server: Server, raw: redis.Redis) -> None:
    r = RateLimit(port=server.port, socket_timeout=0.5)
    assert r.token("w", 1, 1, "1m").allowed
    started = time.monotonic()
    with pytest.raises(ValueError, match="socket_timeout"):
        r.token("w", 1, 1, "1m", wait="5s")
    assert time.monotonic() - started < 5  # refused before it is sent: no retries for a minute
    assert r.peek("w") is not None and r.peek("w").remaining == 0  # type: ignore[union-attr]
    patient = RateLimit(port=server.port, socket_timeout=2)
    assert patient.period("p", 1, 300).allowed
    assert patient.period("p", 1, 300, wait=1000).allowed  # admitted when the window ends
