"""The limits storages (sync, asyncio with coredis and redis-py, cluster) on real servers,
through limits' own strategies and storage_from_string."""

from __future__ import annotations

import time
from typing import Any, Iterator, List

import limits.aio.storage
import limits.storage
import pytest
import redis
from conftest import Server, calls
from limits import RateLimitItemPerDay, RateLimitItemPerMinute, RateLimitItemPerSecond, parse
from limits.aio import strategies as aio_strategies
from limits.errors import StorageError
from limits.storage import storage_from_string
from limits.strategies import (
    FixedWindowRateLimiter,
    MovingWindowRateLimiter,
    SlidingWindowCounterRateLimiter,
)

from redis_ratelimit import ModuleNotLoadedError
from redis_ratelimit import commands as cmd
from redis_ratelimit.limits import (
    COUNTER_LIMIT,
    AsyncModuleClusterStorage,
    AsyncModuleSentinelStorage,
    AsyncModuleStorage,
    ModuleClusterStorage,
    ModuleSentinelStorage,
    ModuleStorage,
    redis_uri,
)


@pytest.fixture
def storage(server: Server, raw: redis.Redis) -> Iterator[ModuleStorage]:
    s = storage_from_string(f"ratelimit://127.0.0.1:{server.port}")
    assert isinstance(s, ModuleStorage)
    yield s


def test_schemes_are_registered_and_the_classes_are_limits_redis_storages(server: Server) -> None:
    p = server.port
    for uri in (f"ratelimit://127.0.0.1:{p}", f"ratelimit://127.0.0.1:{p}/0", f"redis://127.0.0.1:{p}"):
        s = ModuleStorage(uri)
        assert isinstance(s, limits.storage.RedisStorage) and s.check()
    assert type(storage_from_string(f"ratelimit://127.0.0.1:{p}")) is ModuleStorage
    assert type(storage_from_string(f"async+ratelimit://127.0.0.1:{p}")) is AsyncModuleStorage
    assert issubclass(AsyncModuleStorage, limits.aio.storage.RedisStorage)
    assert issubclass(ModuleClusterStorage, limits.storage.RedisClusterStorage)
    assert issubclass(AsyncModuleClusterStorage, limits.aio.storage.RedisClusterStorage)
    assert redis_uri("ratelimit+unix:///tmp/s.sock") == "redis+unix:///tmp/s.sock"
    assert redis_uri("async+ratelimits://h:1") == "async+rediss://h:1"
    assert redis_uri("ratelimit+cluster://a:1,b:2") == "redis+cluster://a:1,b:2"


def test_unix_socket_scheme(server: Server, raw: redis.Redis) -> None:
    s = storage_from_string(f"ratelimit+unix://{server.socket}")
    assert isinstance(s, ModuleStorage) and s.incr("k", 60, 2) == 2
    assert raw.exists("LIMITS:rl:k")


def test_fixed_window_counter_is_unbounded_and_fixed_from_the_first_hit(
    storage: ModuleStorage, raw: redis.Redis
) -> None:
    item = RateLimitItemPerMinute(1)
    key = item.key_for("u")
    assert storage.incr(key, item.get_expiry()) == 1
    assert storage.incr(key, item.get_expiry(), amount=10) == 11  # counts past the limit
    assert storage.get(key) == 11 and storage.get("nothing") == 0
    assert raw.keys("*") == [f"LIMITS:rl:{key}".encode()]  # beside limits. own key name (LIMITS:<key>), one key
    assert 59_000 < raw.pttl(f"LIMITS:rl:{key}") <= 60_000
    assert 55 <= storage.get_expiry(key) - time.time() <= 61  # whole-second TTL, as stock
    info = cmd.info(raw.execute_command("RL.INFO", f"LIMITS:rl:{key}"))  # RESP2 array or RESP3 map
    assert info is not None and info["limit"] == COUNTER_LIMIT
    storage.clear(key)
    assert storage.get(key) == 0


def test_fixed_window_strategy(storage: ModuleStorage) -> None:
    fw = FixedWindowRateLimiter(storage)
    item = parse("3/minute")
    assert [fw.hit(item, "a") for _ in range(4)] == [True, True, True, False]
    assert not fw.test(item, "a")
    stats = fw.get_window_stats(item, "a")
    assert stats.remaining == 0 and 55 <= stats.reset_time - time.time() <= 61
    assert fw.hit(item, "b", cost=3) and not fw.hit(item, "c", cost=4)


def test_one_command_per_call_and_no_lua(storage: ModuleStorage, raw: redis.Redis) -> None:
    item = parse("5/minute")
    # The first hit of a fixed window also reads the stock storage's key once (a GET: the count
    # carried over on a switch); every other call is one command.
    before = calls(raw)
    FixedWindowRateLimiter(storage).hit(item, "f")
    assert calls(raw) - before == 2
    for name, strategy in (("f", FixedWindowRateLimiter(storage)), ("m", MovingWindowRateLimiter(storage))):
        for call in (
            lambda strategy=strategy, name=name: strategy.hit(item, name),
            lambda strategy=strategy, name=name: strategy.test(item, name),
        ):
            before = calls(raw)
            call()
            assert calls(raw) - before == 1
    before = calls(raw)
    MovingWindowRateLimiter(storage).get_window_stats(item, "m")
    assert calls(raw) - before == 1
    stats = str(raw.info("commandstats")).lower()
    assert "eval" not in stats and "script" not in stats


def test_moving_window_strategy(storage: ModuleStorage, raw: redis.Redis) -> None:
    mw = MovingWindowRateLimiter(storage)
    item = parse("3/minute")
    before = time.time()
    assert [mw.hit(item, "m") for _ in range(4)] == [True, True, True, False]
    after = time.time()
    assert not mw.test(item, "m")
    stats = mw.get_window_stats(item, "m")
    assert stats.remaining == 0
    assert before + 60 - 0.001 <= stats.reset_time <= after + 60  # the oldest hit (whole ms) + window
    assert storage.get(item.key_for("m")) == 3
    assert not mw.hit(item, "big", cost=4)  # a cost above the limit never fits
    assert mw.hit(item, "two", cost=2) and not mw.hit(item, "two", cost=2) and mw.hit(item, "two")
    before = time.time()
    empty = mw.get_window_stats(item, "nobody")
    assert empty.remaining == 3 and before + 60 <= empty.reset_time <= time.time() + 60  # now + window, as stock
    assert raw.type(f"LIMITS:rl:{item.key_for('m')}") != b"list"


def test_a_moving_window_hit_costs_the_same_whatever_the_limit(storage: ModuleStorage, raw: redis.Redis) -> None:
    mw = MovingWindowRateLimiter(storage)
    small, large = RateLimitItemPerDay(10), RateLimitItemPerDay(100_000)
    # ids that make both key names equally long (MEMORY USAGE counts the name too)
    for _ in range(10):
        assert mw.hit(small, "sssss") and mw.hit(large, "l")
        time.sleep(0.002)  # distinct ms: one log entry each
    small_key, large_key = f"LIMITS:rl:{small.key_for('sssss')}", f"LIMITS:rl:{large.key_for('l')}"
    assert len(small_key) == len(large_key)
    small_bytes, large_bytes = raw.memory_usage(small_key), raw.memory_usage(large_key)
    assert small_bytes is not None and large_bytes is not None
    # MEMORY USAGE counts the allocator's usable size: libc malloc (Valkey 9.1.2's wheel) may hand
    # a growing log a free chunk one or two 16-byte steps larger than asked (seen: 152 vs 168 in
    # one run of six), so equal up to that slack; a cost that grew with the limit would be
    # kilobytes apart at 100 000.
    assert abs(small_bytes - large_bytes) <= 32, (small_bytes, large_bytes)


def test_moving_window_key_expires_with_the_window(storage: ModuleStorage, raw: redis.Redis) -> None:
    item = RateLimitItemPerSecond(1)
    assert storage.acquire_entry(item.key_for("e"), 1, 1)
    assert 0 < raw.pttl(f"LIMITS:rl:{item.key_for('e')}") <= 1000
    time.sleep(1.1)
    assert storage.get(item.key_for("e")) == 0


def test_reset_deletes_only_the_prefix_and_counts(server: Server, raw: redis.Redis) -> None:
    ours = ModuleStorage(server.url, key_prefix="mine")
    theirs = ModuleStorage(server.url, key_prefix="theirs")
    for i in range(25):
        ours.incr(f"k{i}", 60)
    theirs.incr("k", 60)
    assert ours.reset() == 25
    assert raw.keys("*") == [b"theirs:rl:k"]


def test_wrap_exceptions_and_a_server_without_the_module(plain_server: Server) -> None:
    plain = ModuleStorage(plain_server.url)
    with pytest.raises(ModuleNotLoadedError, match="MODULE LOAD"):
        plain.incr("k", 1)
    wrapped = ModuleStorage(plain_server.url, wrap_exceptions=True)
    with pytest.raises(StorageError):
        wrapped.incr("k", 1)
    assert plain.check()  # PING still works


def test_sliding_window_counter_is_limits_weighted_estimate(storage: ModuleStorage, raw: redis.Redis) -> None:
    sw = SlidingWindowCounterRateLimiter(storage)
    item = parse("10/second")
    assert all(sw.hit(item, "w") for _ in range(10)) and not sw.hit(item, "w")
    previous, previous_ttl, current, current_ttl = storage.get_sliding_window(item.key_for("w"), 1)
    assert (previous, current) == (0, 10) and 0 < current_ttl < 2.0
    assert raw.keys("*") == [f"LIMITS:rl:{{{item.key_for('w')}}}".encode()]  # one key, not two
    # the exact rule, at chosen instants on the same command the storage sends
    t0, key = 4_000_000_000_000, "anchored"

    def hit(at: int, cost: int = 1) -> bool:
        reply = raw.execute_command("RL.SLIDE", key, 10, 1000, "BUCKETS", 1, "ANCHOR", "FLOOR", "COST", cost, "AT", at)
        return bool(reply[0])

    assert hit(t0 + 300, 10)  # the windows are anchored here: [t0+300, t0+1300)
    assert not hit(t0 + 1299)
    # at t0+1300+x the previous window's 10 weigh floor(10 × (1000 − x) / 1000)
    assert hit(t0 + 1400)  # 9 + 0 + 1 <= 10
    assert hit(t0 + 1550) and hit(t0 + 1550)  # 7 + 1 + 1, 7 + 2 + 1
    assert not hit(t0 + 1550) and not hit(t0 + 1600)  # 7 + 3 + 1 > 10
    assert hit(t0 + 1601)  # floor(6.99) = 6: 6 + 3 + 1 <= 10 (the weighted sum unfloored would refuse)
    storage.clear_sliding_window(item.key_for("w"), 1)
    assert storage.get_sliding_window(item.key_for("w"), 1) == (0, 0.0, 0, 0.0)


async def _async_workload(s: Any) -> None:
    fw = aio_strategies.FixedWindowRateLimiter(s)
    mw = aio_strategies.MovingWindowRateLimiter(s)
    item = parse("2/minute")
    assert [await fw.hit(item, "f") for _ in range(3)] == [True, True, False]
    assert [await mw.hit(item, "m") for _ in range(3)] == [True, True, False]
    assert (await mw.get_window_stats(item, "m")).remaining == 0
    assert await s.incr("x", 60, 5) == 5 and await s.get("x") == 5
    assert 55 <= await s.get_expiry("x") - time.time() <= 61
    assert await s.check()
    assert await s.reset() == 3


@pytest.mark.parametrize("implementation", ["coredis", "redispy"])
async def test_async_storage(server: Server, raw: redis.Redis, implementation: str) -> None:
    s = storage_from_string(f"async+ratelimit://127.0.0.1:{server.port}", implementation=implementation)
    assert isinstance(s, AsyncModuleStorage)
    await _async_workload(s)
    stats = str(raw.info("commandstats")).lower()
    assert "eval" not in stats and "script" not in stats


@pytest.mark.parametrize("implementation", ["coredis", "redispy"])
async def test_async_storage_without_the_module(plain_server: Server, implementation: str) -> None:
    s = AsyncModuleStorage(f"async+ratelimit://127.0.0.1:{plain_server.port}", implementation=implementation)
    with pytest.raises(ModuleNotLoadedError):
        await s.incr("k", 1)


def test_cluster_storage(cluster: List[Server]) -> None:
    uri = "ratelimit+cluster://" + ",".join(f"127.0.0.1:{n.port}" for n in cluster)
    s = storage_from_string(uri)
    assert isinstance(s, ModuleClusterStorage)
    s.reset()
    fw, mw = FixedWindowRateLimiter(s), MovingWindowRateLimiter(s)
    item = parse("2/minute")
    for user in ("alice", "bob", "carol", "dave", "erin"):
        assert [fw.hit(item, user) for _ in range(3)] == [True, True, False]
        assert [mw.hit(item, "m" + user) for _ in range(3)] == [True, True, False]
    assert s.reset() == 10


@pytest.mark.parametrize("implementation", ["coredis", "redispy"])
async def test_async_cluster_storage(cluster: List[Server], implementation: str) -> None:
    uri = "async+ratelimit+cluster://" + ",".join(f"127.0.0.1:{n.port}" for n in cluster)
    s = storage_from_string(uri, implementation=implementation)
    assert isinstance(s, AsyncModuleClusterStorage)
    await s.reset()
    mw = aio_strategies.MovingWindowRateLimiter(s)
    item = parse("1/minute")
    for user in ("alice", "bob", "carol"):
        assert [await mw.hit(item, user) for _ in range(2)] == [True, False]
    assert await s.reset() == 3


def test_sliding_window_ttls_from_rl_info() -> None:
    """The TTLs limits gets, from an RL.INFO reply: previous until start + 2P, current until
    start + 3P, each at the middle of the server's ms; 0 for an empty counter."""
    from redis_ratelimit.limits import _sliding_window

    start, period = 4_000_000_000_000, 1000
    info = [b"window_ms", period, b"window_counts", [0, 3], b"window_start_ms", start, b"now_ms", start + period]
    previous, previous_ttl, current, current_ttl = _sliding_window(info, 1)
    assert (previous, previous_ttl, current) == (0, 0.0, 3)
    # read in the very ms of the first hit: limits' reset `current_ttl % 1` must be a whole
    # period away, not 0
    assert current_ttl == 1.9995 and current_ttl % 1 == pytest.approx(1, abs=0.001)
    info[3] = [4, 1]
    info[7] = start + period + 250  # 250 ms into the current window
    assert _sliding_window(info, 1) == (4, 0.7495, 1, 1.7495)
    assert _sliding_window(None, 1) == (0, 0.0, 0, 0.0)


def test_sentinel_storage(sentinel: List[Server]) -> None:
    master, watcher = sentinel
    s = storage_from_string(f"ratelimit+sentinel://127.0.0.1:{watcher.port}/mymaster")
    assert isinstance(s, ModuleSentinelStorage) and isinstance(s, limits.storage.RedisSentinelStorage)
    s.reset()
    item = parse("2/minute")
    assert [FixedWindowRateLimiter(s).hit(item, "f") for _ in range(3)] == [True, True, False]
    assert [MovingWindowRateLimiter(s).hit(item, "m") for _ in range(3)] == [True, True, False]
    assert [SlidingWindowCounterRateLimiter(s).hit(item, "w") for _ in range(3)] == [True, True, False]
    assert redis.Redis(port=master.port).dbsize() == 3
    assert s.reset() == 3


@pytest.mark.parametrize("implementation", ["coredis", "redispy"])
async def test_async_sentinel_storage(sentinel: List[Server], implementation: str) -> None:
    master, watcher = sentinel
    uri = f"async+ratelimit+sentinel://127.0.0.1:{watcher.port}/mymaster"
    s = storage_from_string(uri, implementation=implementation)
    assert isinstance(s, AsyncModuleSentinelStorage)
    await s.reset()
    await _async_workload(s)


def test_switched_from_the_stock_storage_on_a_live_redis(server: Server, raw: redis.Redis) -> None:
    """Issue 39: the stock ``RedisStorage`` counted first (strings, a list for the moving window);
    the module's storage then never meets ``WRONGTYPE`` — its keys are ``LIMITS:rl:<key>`` — and a
    fixed window that starts carries the stock count over, once. A stock instance still running
    keeps counting on its own key."""
    stock = limits.storage.RedisStorage(f"redis://127.0.0.1:{server.port}")
    item = RateLimitItemPerMinute(5)
    stock_fixed, stock_moving = FixedWindowRateLimiter(stock), MovingWindowRateLimiter(stock)
    assert stock_fixed.hit(item, "alice") and stock_fixed.hit(item, "alice")
    assert stock_moving.hit(item, "bob")
    ours = storage_from_string(f"ratelimit://127.0.0.1:{server.port}")
    fixed, moving = FixedWindowRateLimiter(ours), MovingWindowRateLimiter(ours)
    assert fixed.hit(item, "alice")
    assert fixed.get_window_stats(item, "alice").remaining == 2  # 2 stock hits + this one
    assert fixed.hit(item, "alice") and fixed.get_window_stats(item, "alice").remaining == 1
    assert moving.hit(item, "bob")  # the stock list is not touched: the moving window starts fresh
    assert stock_fixed.hit(item, "alice") and stock_moving.hit(item, "bob")  # stock goes on
    assert raw.type(f"LIMITS:{item.key_for('alice')}") == b"string"
    # Without a stock count, a window counts itself only.
    assert ours.incr("carol", 60) == 1


async def test_async_storage_switched_from_the_stock_storage(server: Server, raw: redis.Redis) -> None:
    raw.set("LIMITS:dave", 3, px=60_000)
    s = storage_from_string(f"async+ratelimit://127.0.0.1:{server.port}", implementation="redispy")
    assert await s.incr("dave", 60) == 4
    assert await s.incr("dave", 60) == 5
    assert raw.get("LIMITS:dave") == b"3"
