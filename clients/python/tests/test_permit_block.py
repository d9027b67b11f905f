"""PermitBlock (threads) and AsyncPermitBlock (asyncio) against a real server: never more
admitted than the server granted, one refill in flight, refunds at the block's end (never after a
fixed window's end), errors, close() — the shared ones on a token bucket and on GCRA (CL.THROTTLE)."""

from __future__ import annotations

import asyncio
import threading
import time
from concurrent.futures import ThreadPoolExecutor
from typing import List

import pytest
import redis
from conftest import Server, calls

from redis_ratelimit import (
    AsyncPermitBlock,
    AsyncRateLimit,
    BlockLimit,
    Decision,
    Leaky,
    Period,
    PermitBlock,
    RateLimit,
    Slide,
    Throttle,
    Token,
)

POOL = Token(50, 1, "1h")  # a fixed pool for the length of a test
#: The algorithms whose blocks behave alike (grant now, refund at the end): the shared tests run on each.
KINDS = ("token", "gcra")


def tokens(raw: redis.Redis, key: str) -> int:
    info = RateLimit(raw).limiter_info(key)
    assert info is not None
    return int(info["tokens"])


def hourly(kind: str, n: int) -> BlockLimit:
    """``n`` permits at once, then one an hour: a token bucket, or GCRA (``CL.THROTTLE``)."""
    return Token(n, 1, "1h") if kind == "token" else Throttle(n - 1, 1, 3600)


def left(raw: redis.Redis, key: str, limit: BlockLimit) -> int:
    """The whole permits ``key`` has left now: ``RL.INFO``'s tokens, or for GCRA what
    ``CL.THROTTLE … 0`` (which takes nothing) says remains."""
    if isinstance(limit, Throttle):
        return RateLimit(raw).throttle(key, limit.max_burst, limit.count, limit.period_s, 0).remaining
    return tokens(raw, key)


@pytest.mark.parametrize("kind", KINDS)
def test_threads_on_four_instances_never_exceed_the_server(server: Server, raw: redis.Redis, kind: str) -> None:
    rl = RateLimit(port=server.port)
    limit = hourly(kind, 50)
    blocks = [PermitBlock(rl, "hot", limit, size=8, refill_below=2) for _ in range(4)]
    with ThreadPoolExecutor(16) as pool:
        outcomes = list(pool.map(lambda i: blocks[i % 4].take(), range(200)))
    admitted = sum(1 for d in outcomes if d.allowed)
    assert 50 - 4 * 8 * 2 <= admitted <= 50
    assert all(d.retry_after_ms > 0 for d in outcomes if not d.allowed)
    for b in blocks:
        b.close()
    assert admitted + left(raw, "hot", limit) == 50  # every unused permit back, none admitted without a grant


@pytest.mark.parametrize("kind", KINDS)
def test_one_refill_in_flight_across_threads(server: Server, raw: redis.Redis, kind: str) -> None:
    limit = hourly(kind, 1000)
    b = PermitBlock(RateLimit(port=server.port), "hot", limit, size=10)
    sent_before = calls(raw)
    start = threading.Barrier(20)

    def consumer() -> List[Decision]:
        start.wait()
        return [b.take() for _ in range(5)]

    with ThreadPoolExecutor(20) as pool:
        outcomes = [d for ds in pool.map(lambda _: consumer(), range(20)) for d in ds]
    assert all(d.allowed and d.limit == 1000 for d in outcomes)
    assert b.stats.calls == 10
    assert calls(raw) - sent_before == 10  # the server saw the 10 grants and nothing else
    assert left(raw, "hot", limit) == 900
    b.close()


@pytest.mark.parametrize("kind", KINDS)
def test_partial_grant_then_a_refused_single_permit(server: Server, raw: redis.Redis, kind: str) -> None:
    limit = hourly(kind, 15)
    b = PermitBlock(RateLimit(port=server.port), "p", limit, size=10)
    assert all(b.take().allowed for _ in range(15))
    refused = b.take()
    assert not refused.allowed and 0 < refused.retry_after_ms <= 3_600_000
    assert b.stats.granted == 15 and b.stats.calls == 5  # 10; 10 refused + 5; 10 refused + 1 refused
    b.close()
    assert left(raw, "p", limit) == 0


@pytest.mark.parametrize("kind", KINDS)
def test_refund_at_the_end_of_the_lifetime(server: Server, raw: redis.Redis, kind: str) -> None:
    limit = hourly(kind, 100)
    with PermitBlock(RateLimit(port=server.port), "t", limit, size=10, lifetime=150) as b:
        for _ in range(3):
            assert b.take().allowed
        assert left(raw, "t", limit) == 90
        time.sleep(0.4)
        assert left(raw, "t", limit) == 97  # a GCRA key's TAT moved back by the 7 unused
        assert b.stats.refunded == 7 and b.held == 0


def test_fixed_window_refunds_before_its_end(server: Server, raw: redis.Redis) -> None:
    with PermitBlock(RateLimit(port=server.port), "w", Period(100, "10s"), size=10, lifetime=150) as b:
        for _ in range(4):
            b.take()
        time.sleep(0.4)
        info = RateLimit(raw).limiter_info("w")
        assert info is not None and info["used"] == 4


def test_fixed_window_never_refunds_after_its_end(server: Server, raw: redis.Redis) -> None:
    rl = RateLimit(port=server.port)
    b = PermitBlock(rl, "w", Period(100, 300), size=10, lifetime="10s", refund_guard=1000)
    b.take()
    time.sleep(0.35)
    assert rl.period("w", 100, 300, cost=5).allowed  # the next window, used by someone else
    time.sleep(0.1)
    b.close()
    assert b.stats.refunded == 0 and b.stats.dropped == 9
    info = rl.limiter_info("w")
    assert info is not None and info["used"] == 5  # a late refund would have cancelled their use


def test_errors_reach_every_waiting_thread(server: Server, raw: redis.Redis) -> None:
    raw.set("s", "a string")
    b = PermitBlock(RateLimit(port=server.port), "s", POOL, size=5)
    errors: List[BaseException] = []

    def consumer() -> None:
        try:
            b.take()
        except redis.ResponseError as e:
            errors.append(e)

    threads = [threading.Thread(target=consumer) for _ in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert len(errors) == 4 and "WRONGTYPE" in str(errors[0])
    raw.delete("s")
    assert b.take().allowed  # recovers
    b.close()


@pytest.mark.parametrize("kind", KINDS)
def test_close_returns_the_unused_and_refuses_further_takes(server: Server, raw: redis.Redis, kind: str) -> None:
    limit = hourly(kind, 100)
    b = PermitBlock(RateLimit(port=server.port), "c", limit, size=10)
    b.take()
    b.take()
    b.close()
    assert left(raw, "c", limit) == 98
    with pytest.raises(RuntimeError, match="closed"):
        b.take()


def test_leaky_nodelay_carries_blocks_the_others_are_refused(server: Server, raw: redis.Redis) -> None:
    rl = RateLimit(port=server.port)
    meter = Leaky(20, 1, "1h", nodelay=True)
    with PermitBlock(rl, "l", meter, size=5) as b:
        for _ in range(3):
            assert b.take().allowed
    for _ in range(3):
        rl.apply("l2", meter)
    a, c = rl.peek("l"), rl.peek("l2")
    assert a is not None and c is not None and a.remaining == c.remaining
    with pytest.raises(ValueError, match="sliding window"):
        PermitBlock(rl, "k", Slide(5, "1s"), size=5)
    with pytest.raises(ValueError, match="nodelay"):
        PermitBlock(rl, "k", Leaky(5, 1, "1s"), size=5)
    with pytest.raises(ValueError, match="size"):
        PermitBlock(rl, "k", POOL, size=0)


@pytest.mark.parametrize("kind", KINDS)
async def test_async_tasks_share_one_refill_never_exceed_and_refund(
    server: Server, raw: redis.Redis, kind: str
) -> None:
    rl = AsyncRateLimit(port=server.port)
    limit = hourly(kind, 50)
    blocks = [AsyncPermitBlock(rl, "hot", limit, size=8, refill_below=2) for _ in range(4)]
    outcomes = await asyncio.gather(*(blocks[i % 4].take() for i in range(200)))
    admitted = sum(1 for d in outcomes if d.allowed)
    assert 50 - 4 * 8 * 2 <= admitted <= 50
    assert all(d.retry_after_ms > 0 for d in outcomes if not d.allowed)
    for b in blocks:
        await b.close()
    assert admitted + left(raw, "hot", limit) == 50

    thousand = hourly(kind, 1000)
    one = AsyncPermitBlock(rl, "one", thousand, size=10)
    assert all(d.allowed for d in await asyncio.gather(*(one.take() for _ in range(100))))
    assert one.stats.calls == 10 and left(raw, "one", thousand) == 900
    await one.close()

    hundred = hourly(kind, 100)
    async with AsyncPermitBlock(rl, "t", hundred, size=10, lifetime=150) as t:
        for _ in range(3):
            await t.take()
        await asyncio.sleep(0.4)
        assert left(raw, "t", hundred) == 97 and t.stats.refunded == 7

    fifteen = hourly(kind, 15)
    p = AsyncPermitBlock(rl, "p", fifteen, size=10)
    assert all([(await p.take()).allowed for _ in range(15)])
    refused = await p.take()
    assert not refused.allowed and refused.retry_after_ms > 0 and p.stats.calls == 5
    await p.close()
    await rl.aclose()


async def test_async_window_drop_errors_and_close(server: Server, raw: redis.Redis) -> None:
    rl = AsyncRateLimit(port=server.port)
    w = AsyncPermitBlock(rl, "w", Period(100, 300), size=10, lifetime="10s", refund_guard=1000)
    await w.take()
    await asyncio.sleep(0.35)
    assert (await rl.period("w", 100, 300, cost=5)).allowed
    await w.close()
    assert w.stats.refunded == 0 and w.stats.dropped == 9

    raw.set("s", "a string")
    e = AsyncPermitBlock(rl, "s", POOL, size=5)
    results = await asyncio.gather(*(e.take() for _ in range(3)), return_exceptions=True)
    assert all(isinstance(r, redis.ResponseError) for r in results)
    await e.close()

    c = AsyncPermitBlock(rl, "c", Token(100, 1, "1h"), size=10)
    await c.take()
    await c.close()
    assert tokens(raw, "c") == 99
    with pytest.raises(RuntimeError, match="closed"):
        await c.take()
    await rl.aclose()


# -- GCRA (CL.THROTTLE): quantity takes the block, RL.REFUND moves the TAT back ----------------


def test_gcra_blocks_match_single_calls_and_are_capped_at_the_burst(server: Server, raw: redis.Redis) -> None:
    rl = RateLimit(port=server.port)
    limit = Throttle(19, 1, 3600)
    with PermitBlock(rl, "g", limit, size=5) as b:
        for _ in range(3):
            assert b.take().allowed
    for _ in range(3):
        rl.throttle("g2", limit.max_burst, limit.count, limit.period_s)
    assert left(raw, "g", limit) == left(raw, "g2", limit) == 17  # the same as three single calls

    # a block is at most max_burst + 1: CL.THROTTLE refuses a larger quantity whatever the state
    with pytest.raises(ValueError, match=r"size must be at most max_burst \+ 1 = 5"):
        PermitBlock(rl, "k", Throttle(4, 1, 60), size=6)
    with pytest.raises(ValueError, match=r"max_burst \+ 1 = 1"):
        AsyncPermitBlock(AsyncRateLimit(port=server.port), "k", Throttle(0, 1, 60), size=2)
    with PermitBlock(rl, "full", Throttle(4, 1, 60), size=5) as full:
        assert all(full.take().allowed for _ in range(5))
        assert full.stats.calls == 1 and full.stats.granted == 5
