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
from redis.backoff import NoBackoff
from redis.retry import Retry
from waiting import dropped_while_waiting

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


def test_a_wait_longer_than_the_socket_timeout_reads_its_answer(server: Server, raw: redis.Redis) -> None:
    """Issue 39: the waiting call reads its answer with a timeout covering the wait (the client's
    0.5 s would cut a 1 s wait off, and redis-py would send it again): admitted, once."""
    r = RateLimit(port=server.port, socket_timeout=0.5)
    assert r.token("w", 1, 1, "1s").allowed
    admitted = int(raw.info("ratelimit")["ratelimit_wait_admitted"])
    started = time.monotonic()
    assert r.token("w", 1, 1, "1s", wait="3s").allowed
    assert time.monotonic() - started >= 0.5  # it waited in the server, past the socket timeout
    assert int(raw.info("ratelimit")["ratelimit_wait_admitted"]) == admitted + 1
    assert r.peek("w") is not None and r.peek("w").remaining == 0  # type: ignore[union-attr]
    assert r.ping()  # the connection's own timeout is back: other calls keep it
    patient = RateLimit(port=server.port, socket_timeout=2)
    assert patient.period("p", 1, 300).allowed
    assert patient.period("p", 1, 300, wait=1000).allowed  # admitted when the window ends


def test_a_call_that_may_have_counted_is_never_sent_again(server: Server, raw: redis.Redis) -> None:
    """Issue 39: a client set to retry (``retry_on_error``, ``retry_on_timeout``) re-sends a
    command whose connection broke; a limiting call is raised instead (its first copy may have
    counted; a waiting one would lose its place in the queue)."""
    retried = [redis.TimeoutError, redis.ConnectionError]  # what a client set to retry retries
    r = RateLimit(port=server.port, retry=Retry(NoBackoff(), 3), retry_on_error=retried)
    dropped_while_waiting(
        [server], lambda: r.token("resend", 1, 1, "1s"), lambda: r.token("resend", 1, 1, "1s", wait="3s")
    )
    assert r.ping()  # the client goes on
