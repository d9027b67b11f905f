"""Issue 39 on the asyncio and cluster clients (``RateLimit``'s are in test_existing_clients.py):
a ``wait=`` longer than the client's ``socket_timeout`` reads its answer (was refused with a
``ValueError``), admitted once; a call that may have counted is never sent again by a client
set to retry (redis-py's cluster clients retry by default) when its connection drops."""

from __future__ import annotations

import contextlib
import time
from typing import Any, Callable, Iterator, List

import redis
import redis.asyncio.retry
from conftest import Server
from redis.backoff import NoBackoff
from waiting import async_dropped_while_waiting, dropped_while_waiting, stat

from redis_ratelimit import AsyncRateLimit, AsyncRateLimitCluster, RateLimitCluster


async def test_async_wait_longer_than_the_socket_timeout_reads_its_answer(server: Server, raw: redis.Redis) -> None:
    r = AsyncRateLimit(port=server.port, socket_timeout=0.5)
    assert (await r.token("w", 1, 1, "1s")).allowed
    admitted = stat([server], "ratelimit_wait_admitted")
    started = time.monotonic()
    assert (await r.token("w", 1, 1, "1s", wait="3s")).allowed
    assert time.monotonic() - started >= 0.5  # it waited in the server, past the socket timeout
    assert stat([server], "ratelimit_wait_admitted") == admitted + 1
    peeked = await r.peek("w")
    assert peeked is not None and peeked.remaining == 0
    assert await r.ping()  # the connection's own timeout applies to other calls
    single = AsyncRateLimit(port=server.port, socket_timeout=0.5, single_connection_client=True)
    assert (await single.period("p", 1, 300)).allowed
    assert (await single.period("p", 1, 300, wait=2000)).allowed  # admitted when the window ends
    await single.aclose()
    await r.aclose()


async def test_async_call_that_may_have_counted_is_never_sent_again(server: Server, raw: redis.Redis) -> None:
    retried = [redis.TimeoutError, redis.ConnectionError]
    r = AsyncRateLimit(port=server.port, retry=redis.asyncio.retry.Retry(NoBackoff(), 3), retry_on_error=retried)
    await async_dropped_while_waiting(
        [server], lambda: r.token("resend", 1, 1, "1s"), lambda: r.token("resend", 1, 1, "1s", wait="3s")
    )
    assert await r.ping()  # the client goes on
    await r.aclose()


def test_cluster_wait_longer_than_the_socket_timeout_reads_its_answer(cluster: List[Server]) -> None:
    r = RateLimitCluster(host="127.0.0.1", port=cluster[0].port, socket_timeout=0.5)
    for key in ("{user1}:w", "{user2}:w", "{user3}:w"):
        assert r.token(key, 1, 1, "1s").allowed
        admitted = stat(cluster, "ratelimit_wait_admitted")
        started = time.monotonic()
        assert r.token(key, 1, 1, "1s", wait="3s").allowed
        assert time.monotonic() - started >= 0.5
        assert stat(cluster, "ratelimit_wait_admitted") == admitted + 1
        peeked = r.peek(key)
        assert peeked is not None and peeked.remaining == 0
    assert r.ping()
    r.close()


def test_cluster_call_that_may_have_counted_is_never_sent_again(cluster: List[Server]) -> None:
    r = RateLimitCluster(host="127.0.0.1", port=cluster[0].port)  # redis-py's cluster retries: 3
    dropped_while_waiting(
        cluster, lambda: r.token("{resend}", 1, 1, "1s"), lambda: r.token("{resend}", 1, 1, "1s", wait="3s")
    )
    assert r.token("{resend}:after", 1, 1, "1s").allowed  # the client goes on
    r.close()


async def test_async_cluster_wait_longer_than_the_socket_timeout_reads_its_answer(cluster: List[Server]) -> None:
    r = AsyncRateLimitCluster(host="127.0.0.1", port=cluster[0].port, socket_timeout=0.5)
    for key in ("{user1}:aw", "{user2}:aw", "{user3}:aw"):
        assert (await r.token(key, 1, 1, "1s")).allowed
        admitted = stat(cluster, "ratelimit_wait_admitted")
        started = time.monotonic()
        assert (await r.token(key, 1, 1, "1s", wait="3s")).allowed
        assert time.monotonic() - started >= 0.5
        assert stat(cluster, "ratelimit_wait_admitted") == admitted + 1
        peeked = await r.peek(key)
        assert peeked is not None and peeked.remaining == 0
    await r.aclose()


async def test_async_cluster_call_that_may_have_counted_is_never_sent_again(cluster: List[Server]) -> None:
    r = AsyncRateLimitCluster(host="127.0.0.1", port=cluster[0].port)  # redis-py's cluster retries: 3
    await async_dropped_while_waiting(
        cluster, lambda: r.token("{aresend}", 1, 1, "1s"), lambda: r.token("{aresend}", 1, 1, "1s", wait="3s")
    )
    assert (await r.token("{aresend}:after", 1, 1, "1s")).allowed  # the client goes on
    await r.aclose()


def _owner(nodes: List[Server], key: str) -> Server:
    """The master serving ``key``'s slot."""
    raw = redis.Redis(port=nodes[0].port)
    slot = int(raw.execute_command("CLUSTER", "KEYSLOT", key))
    for start, end, master, *_ in raw.execute_command("CLUSTER", "SLOTS"):
        if start <= slot <= end:
            return next(n for n in nodes if n.port == int(master[1]))
    raise AssertionError(f"no master serves {key}")


@contextlib.contextmanager
def _migrating(nodes: List[Server], key: str) -> Iterator[None]:
    """``key``'s slot migrating from its master to another (which the master's ASK replies name
    for a key it does not hold); stable again after, the key gone."""
    source = _owner(nodes, key)
    dest = next(n for n in nodes if n is not source)
    src, dst = redis.Redis(port=source.port), redis.Redis(port=dest.port, single_connection_client=True)
    slot = int(src.execute_command("CLUSTER", "KEYSLOT", key))
    dst.execute_command("CLUSTER", "SETSLOT", slot, "IMPORTING", src.execute_command("CLUSTER", "MYID"))
    src.execute_command("CLUSTER", "SETSLOT", slot, "MIGRATING", dst.execute_command("CLUSTER", "MYID"))
    try:
        yield
    finally:
        dst.execute_command("ASKING")
        dst.delete(key)
        for r in (dst, src):
            r.execute_command("CLUSTER", "SETSLOT", slot, "STABLE")
        dst.close()


def _stale_slot(client: Any, nodes: List[Server], key: str) -> Callable[[], bool]:
    """The client's slot map sends ``key`` to a master that answers MOVED; returns whether the
    map sends it to its master again."""
    slot = int(redis.Redis(port=nodes[0].port).execute_command("CLUSTER", "KEYSLOT", key))
    owner = _owner(nodes, key)
    other = next(n for n in nodes if n is not owner)
    stale = next(n for n in client.get_primaries() if n.port == other.port)
    client.nodes_manager.slots_cache[slot] = [stale]
    return lambda: bool(client.nodes_manager.slots_cache[slot][0].port == owner.port)


def test_cluster_follows_redirections_counting_once(cluster: List[Server]) -> None:
    """MOVED and ASK replies are followed (the node did not run the call): each call counts once."""
    r = RateLimitCluster(host="127.0.0.1", port=cluster[0].port)
    mapped = _stale_slot(r, cluster, "{moved}")
    assert r.token("{moved}", 2, 1, "1m").remaining == 1
    assert mapped(), "the slot map read again"
    assert r.token("{moved}", 2, 1, "1m").remaining == 0
    with _migrating(cluster, "{asked}"):
        assert r.token("{asked}", 2, 1, "1m").remaining == 1
        assert r.token("{asked}", 2, 1, "1m").remaining == 0
    r.close()


async def test_async_cluster_follows_redirections_counting_once(cluster: List[Server]) -> None:
    r = AsyncRateLimitCluster(host="127.0.0.1", port=cluster[0].port)
    await r.initialize()
    mapped = _stale_slot(r, cluster, "{amoved}")
    assert (await r.token("{amoved}", 2, 1, "1m")).remaining == 1
    assert mapped(), "the slot map read again"
    assert (await r.token("{amoved}", 2, 1, "1m")).remaining == 0
    with _migrating(cluster, "{aasked}"):
        assert (await r.token("{aasked}", 2, 1, "1m")).remaining == 1
        assert (await r.token("{aasked}", 2, 1, "1m")).remaining == 0
    await r.aclose()
