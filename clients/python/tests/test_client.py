"""The sync client against a real server: every method, one command each, exact replies."""

from __future__ import annotations

import threading
import time
from datetime import timedelta
from typing import Iterator

import pytest
import redis
from conftest import Server, calls

from redis_ratelimit import (
    Decision,
    Leaky,
    ModuleNotLoadedError,
    Period,
    RateLimit,
    Slide,
    Token,
)

T0 = 4_000_000_000_000  # a fixed instant (AT) for exact expectations


@pytest.fixture
def r(server: Server, raw: redis.Redis) -> Iterator[RateLimit]:
    client = RateLimit(port=server.port)
    yield client
    client.close()


def test_token_bucket_exact_and_retry_after_is_exact(r: RateLimit) -> None:
    for i in range(5):
        assert r.token("t", 5, 1, "1m", at=T0) == Decision(True, 5, 4 - i, 0, 60_000 * (i + 1))
    refused = r.token("t", 5, 1, "1m", at=T0)
    assert refused == Decision(False, 5, 0, 60_000, 300_000)
    assert not refused
    assert not r.token("t", 5, 1, "1m", at=T0 + 59_999).allowed
    assert r.token("t", 5, 1, "1m", at=T0 + 60_000).allowed


def test_durations_as_int_text_and_timedelta_are_the_same(r: RateLimit) -> None:
    a = r.token("a", 3, 1, 60_000, at=T0)
    b = r.token("b", 3, 1, "1m", at=T0)
    c = r.token("c", 3, 1, timedelta(minutes=1), at=T0)
    assert a == b == c == Decision(True, 3, 2, 0, 60_000)


def test_period_align_and_cost(r: RateLimit) -> None:
    # 5 per calendar day in UTC+8: T0 is 2096-10-02 07:06:40 UTC = 15:06:40 local.
    d = r.period("sms", 5, "1d", align="8h", cost=2, at=T0)
    assert (d.allowed, d.remaining) == (True, 3)
    day = 86_400_000
    assert d.reset_after_ms == day - (T0 + 8 * 3_600_000) % day
    assert r.period("utc", 5, "1d", align=True, at=T0).reset_after_ms == day - T0 % day
    assert r.period("free", 5, "1d", at=T0).reset_after_ms == day


def test_slide_exact_and_bucketed(r: RateLimit) -> None:
    assert r.slide("s", 2, "1s", at=T0).remaining == 1
    assert r.slide("s", 2, "1s", at=T0 + 400).remaining == 0
    refused = r.slide("s", 2, "1s", at=T0 + 500)
    assert (refused.allowed, refused.retry_after_ms) == (False, 500)
    assert r.slide("s", 2, "1s", at=T0 + 1000).allowed
    assert r.slide("b", 100, "1m", buckets=6, cost=30, at=T0).remaining == 70


def test_leaky_delay_nodelay(r: RateLimit) -> None:
    assert r.leaky("q", 5, 1, "1s", at=T0) == Decision(True, 5, 4, 0, 1000)
    assert r.leaky("q", 5, 1, "1s", at=T0).retry_after_ms == 1000  # wait for the water ahead
    assert r.leaky("m", 5, 1, "1s", nodelay=True, at=T0).retry_after_ms == 0
    assert r.leaky("m", 5, 1, "1s", nodelay=True, at=T0).retry_after_ms == 0
    assert r.leaky("d", 5, 1, "1s", delay=1, at=T0).retry_after_ms == 0


def test_throttle_is_redis_cells_reply_in_ms(r: RateLimit) -> None:
    # redis-cell's README: CL.THROTTLE user123 15 30 60 1 -> 0 16 15 -1 2
    assert r.throttle("user123", 15, 30, 60, 1, at=T0) == Decision(True, 16, 15, 0, 2000)
    for _ in range(15):
        r.throttle("user123", 15, 30, 60, at=T0)
    refused = r.throttle("user123", 15, 30, 60, at=T0)
    assert (refused.allowed, refused.remaining, refused.retry_after_ms) == (False, 0, 2000)
    assert r.throttle("user123", 15, 30, 60, 17, at=T0).retry_after_ms == -1


def test_all_is_all_or_nothing(r: RateLimit) -> None:
    limits = {"{u}:s": Token(10, 10, "1s"), "{u}:d": Period(2, "1d")}
    first = r.all(limits, at=T0)
    assert first.allowed and first.index == 1 and first.remaining == 1
    assert [d.remaining for d in first.details] == [9, 1]
    assert r.all(limits, costs=[1, 1], at=T0).allowed
    refused = r.all(limits, at=T0)
    assert (refused.allowed, refused.index, refused.limit) == (False, 1, 2)
    # the refused call charged neither limit
    assert r.token("{u}:s", 10, 10, "1s", cost=0, at=T0).remaining == 8
    pairs = [("{v}:a", Slide(3, "1m")), ("{v}:b", Leaky(3, 1, "1s", nodelay=True))]
    assert r.all(pairs, dryrun=True, at=T0).allowed
    assert r.peek("{v}:a") is None  # a dry run creates nothing
    with pytest.raises(ValueError):
        r.all({}, at=T0)
    with pytest.raises(ValueError):
        r.all(limits, costs=[1], at=T0)


def test_refund_peek_and_limiter_info(r: RateLimit) -> None:
    assert r.peek("llm") is None and r.refund("llm", 5) is None and r.limiter_info("llm") is None
    r.token("llm", 100, 100, "1m", cost=80, at=T0)
    after = r.refund("llm", 50, at=T0)
    assert after is not None and after.remaining == 69  # 70 left, less the dry run's 1
    peek = r.peek("llm")
    assert peek is not None and peek.limit == 100
    info = r.limiter_info("llm")
    assert info is not None
    assert info["algorithm"] == "token" and info["capacity"] == 100 and info["tokens"] == 70
    assert info["updated_ms"] == T0


def test_charge_bills_an_overrun_as_a_debt(r: RateLimit) -> None:
    assert r.charge("llm", 5) is None  # nothing live: nothing created
    assert r.peek("llm") is None
    r.leaky("llm", 10, 1, "1s", nodelay=True, cost=10, at=T0)
    # 12 in a bucket of 10 draining 1/s: a request of 1 waits until 9 are left.
    assert r.charge("llm", 2, at=T0) == Decision(False, 10, 0, 3000, 12_000)
    assert not r.leaky("llm", 10, 1, "1s", nodelay=True, at=T0 + 2999).allowed
    assert r.leaky("llm", 10, 1, "1s", nodelay=True, at=T0 + 3000).allowed
    r.slide("sl", 5, "1s")
    with pytest.raises(redis.ResponseError, match="takes no debt"):
        r.charge("sl", 1)


def test_acquire_renew_release(r: RateLimit) -> None:
    first = r.acquire("exports", 2, "2m", at=T0)
    assert first.allowed and first.id is not None and first.remaining == 1
    second = r.acquire("exports", 2, "2m", id="worker-2", at=T0 + 10)
    assert second.id in (b"worker-2", "worker-2") and second.remaining == 0
    refused = r.acquire("exports", 2, "2m", at=T0 + 20)
    assert (refused.allowed, refused.id, refused.retry_after_ms) == (False, None, 120_000 - 20)
    assert r.acquire("exports", 2, "2m", id=first.id, at=T0 + 30).allowed  # renewal
    assert r.release("exports", first.id, at=T0 + 40) is True
    assert r.release("exports", first.id, at=T0 + 40) is False
    info = r.limiter_info("exports")
    assert info is not None and info["algorithm"] == "lease" and info["held"] == 1


def test_ban_and_dryrun(r: RateLimit) -> None:
    for _ in range(2):
        assert r.slide("login", 2, "15m", ban="1h", at=T0).allowed
    banned = r.slide("login", 2, "15m", ban="1h", at=T0)
    assert (banned.allowed, banned.retry_after_ms) == (False, 3_600_000)
    assert not r.slide("login", 2, "15m", at=T0 + 20 * 60_000).allowed
    assert r.token("dry", 1, 1, "1m", dryrun=True).allowed
    assert r.peek("dry") is None


def test_wait_blocks_in_the_server_until_admitted(r: RateLimit, server: Server) -> None:
    assert r.token("q", 1, 1, "1s").allowed
    waiter = RateLimit(port=server.port, socket_timeout=10)
    started = time.monotonic()
    d = waiter.token("q", 1, 1, "1s", wait="5s")
    assert d.allowed
    assert time.monotonic() - started >= 0.9  # not before the bucket had refilled
    waiter.close()


def test_wait_queue_is_fifo(server: Server, raw: redis.Redis) -> None:
    RateLimit(port=server.port).period("fifo", 1, "300ms")
    order = []

    def wait(name: str) -> None:
        c = RateLimit(port=server.port, socket_timeout=10)
        if c.period("fifo", 1, "300ms", wait="5s").allowed:
            order.append(name)

    first = threading.Thread(target=wait, args=("first",))
    first.start()
    deadline = time.monotonic() + 5
    while int(raw.info("ratelimit")["ratelimit_waiting"]) < 1:
        assert time.monotonic() < deadline, "the first waiter never queued"
        time.sleep(0.005)
    second = threading.Thread(target=wait, args=("second",))
    second.start()
    first.join(10)
    second.join(10)
    assert order == ["first", "second"]


def test_every_method_sends_exactly_one_command(r: RateLimit, raw: redis.Redis) -> None:
    lease = r.acquire("l", 5, "1m")
    assert lease.id is not None
    for call in (
        lambda: r.token("t", 5, 1, "1m"),
        lambda: r.period("p", 5, "1m"),
        lambda: r.slide("s", 5, "1m"),
        lambda: r.leaky("k", 5, 1, "1m"),
        lambda: r.throttle("g", 5, 1, 60),
        lambda: r.all({"{x}a": Token(5, 1, "1m"), "{x}b": Period(5, "1m")}),
        lambda: r.refund("t", 1),
        lambda: r.acquire("l", 5, "1m"),
        lambda: r.release("l", lease.id or b""),
        lambda: r.peek("t"),
        lambda: r.limiter_info("t"),
        lambda: r.apply("t", Token(5, 1, "1m")),
    ):
        before = calls(raw)
        call()
        assert calls(raw) - before == 1
    assert "evalsha" not in str(raw.info("commandstats")).lower()


def test_server_errors_keep_their_text(r: RateLimit, raw: redis.Redis) -> None:
    with pytest.raises(redis.ResponseError, match="capacity must be an integer between 1 and"):
        r.token("t", 0, 1, "1s")
    with pytest.raises(redis.ResponseError, match="invalid duration 'soon' for period"):
        r.token("t", 1, 1, "soon")
    raw.set("str", "x")
    with pytest.raises(redis.ResponseError, match="WRONGTYPE key holds a string value, not a rate limiter"):
        r.slide("str", 1, "1s")
    r.token("tok", 1, 1, "1s")
    with pytest.raises(redis.ResponseError, match="token limiter, not a slide limiter"):
        r.slide("tok", 1, "1s")


def test_a_server_without_the_module_says_how_to_load_it(plain_server: Server) -> None:
    c = RateLimit(port=plain_server.port)
    with pytest.raises(ModuleNotLoadedError, match="--loadmodule .*libredis_ratelimit.so") as error:
        c.token("t", 1, 1, "1s")
    assert isinstance(error.value, redis.ResponseError)
    assert "unknown command" in str(error.value)
    assert c.ping()  # the rest of redis-py is untouched


def test_it_stays_a_redis_client(r: RateLimit) -> None:
    assert r.set("k", "v") and r.get("k") == b"v"
    assert "redis_version" in r.info()  # info() is redis-py's INFO; RL.INFO is limiter_info()
    with r.pipeline() as p:
        p.execute_command("RL.TOKEN", "pt", 1, 1, "1s")
        p.execute_command("RL.TOKEN", "pt", 1, 1, "1s")
        first, second = p.execute()
    assert first[0] == 1 and second[0] == 0


def test_decoded_responses(server: Server, raw: redis.Redis) -> None:
    c = RateLimit(port=server.port, decode_responses=True)
    lease = c.acquire("l", 1, "1m")
    assert isinstance(lease.id, str)
    info = c.limiter_info("l")
    assert info is not None and info["algorithm"] == "lease"
    assert c.release("l", lease.id)
