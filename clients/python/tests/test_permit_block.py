"""PermitBlock (threads) and AsyncPermitBlock (asyncio) against a real server: never more
admitted than the server granted, one refill in flight, refunds at the block's end (never after a
fixed window's end), errors, close()."""

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
    Decision,
    Leaky,
    Period,
    PermitBlock,
    RateLimit,
    Slide,
    Token,
)

POOL = Token(50, 1, "1h")  # a fixed pool for the length of a test


def tokens(raw: redis.Redis, key: str) -> int:
    info = RateLimit(raw).limiter_info(key)
    assert info is not None
    return int(info["tokens"])


def test_threads_on_four_instances_never_exceed_the_server(server: Server, raw: redis.Redis) -> None:
    rl = RateLimit(port=server.port)
    blocks = [PermitBlock(rl, "hot", POOL, size=8, refill_below=2) for _ in range(4)]
    with ThreadPoolExecutor(16) as pool:
        outcomes = list(pool.map(lambda i: blocks[i % 4].take(), range(200)))
    admitted = sum(1 for d in outcomes if d.allowed)
    assert 50 - 4 * 8 * 2 <= admitted <= 50
    assert all(d.retry_after_ms > 0 for d in outcomes if not d.allowed)
    for b in blocks:
        b.close()
    assert admitted + tokens(raw, "hot") == 50  # every unused permit back, none admitted without a grant


def test_one_refill_in_flight_across_threads(server: Server, raw: redis.Redis) -> None:
    rl = RateLimit(port=server.port)
    b = PermitBlock(rl, "hot", Token(1000, 1, "1h"), size=10)
    sent_before = calls(raw)
    start = threading.Barrier(20)

    def consumer() -> List[Decision]:
        start.wait()
        return [b.take() for _ in range(5)]

    with ThreadPoolExecutor(20) as pool:
        outcomes = [d for ds in pool.map(lambda _: consumer(), range(20)) for d in ds]
    assert all(d.allowed for d in outcomes)
    assert b.stats.calls == 10
    assert calls(raw) - sent_before == 10  # the server saw the 10 grants and nothing else
    assert tokens(raw, "hot") == 900
    b.close()


def test_partial_grant_then_a_refused_single_permit(server: Server, raw: redis.Redis) -> None:
    b = PermitBlock(RateLimit(port=server.port), "p", Token(15, 1, "1h"), size=10)
    assert all(b.take().allowed for _ in range(15))
    refused = b.take()
    assert not refused.allowed and 0 < refused.retry_after_ms <= 3_600_000
    assert b.stats.granted == 15 and b.stats.calls == 5  # 10; 10 refused + 5; 10 refused + 1 refused
    b.close()


def test_refund_at_the_end_of_the_lifetime(server: Server, raw: redis.Redis) -> None:
    with PermitBlock(RateLimit(port=server.port), "t", Token(100, 1, "1h"), size=10, lifetime=150) as b:
        for _ in range(3):
            b.take()
        assert tokens(raw, "t") == 90
        time.sleep(0.4)
        assert tokens(raw, "t") == 97
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


def test_close_returns_the_unused_and_refuses_further_takes(server: Server, raw: redis.Redis) -> None:
    b = PermitBlock(RateLimit(port=server.port), "c", Token(100, 1, "1h"), size=10)
    b.take()
    b.take()
    b.close()
    assert tokens(raw, "c") == 98
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


async def test_async_tasks_share_one_refill_and_never_exceed(server: Server, raw: redis.Redis) -> None:
    rl = AsyncRateLimit(port=server.port)
    blocks = [AsyncPermitBlock(rl, "hot", POOL, size=8, refill_below=2) for _ in range(4)]
    outcomes = await asyncio.gather(*(blocks[i % 4].take() for i in range(200)))
    admitted = sum(1 for d in outcomes if d.allowed)
    assert 50 - 4 * 8 * 2 <= admitted <= 50
    for b in blocks:
        await b.close()
    assert admitted + tokens(raw, "hot") == 50

    one = AsyncPermitBlock(rl, "one", Token(1000, 1, "1h"), size=10)
    assert all(d.allowed for d in await asyncio.gather(*(one.take() for _ in range(100))))
    assert one.stats.calls == 10 and tokens(raw, "one") == 900
    await one.close()
    await rl.aclose()


async def test_async_lifetime_refund_window_drop_errors_and_close(server: Server, raw: redis.Redis) -> None:
    rl = AsyncRateLimit(port=server.port)
    async with AsyncPermitBlock(rl, "t", Token(100, 1, "1h"), size=10, lifetime=150) as b:
        for _ in range(3):
            await b.take()
        await asyncio.sleep(0.4)
        assert tokens(raw, "t") == 97 and b.stats.refunded == 7

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
