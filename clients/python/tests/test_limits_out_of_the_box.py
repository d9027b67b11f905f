"""Regression suite: the limits storages as Flask-Limiter and SlowAPI apps use them, on a module
loaded with no arguments (issue 23, "limits storages"): ``0 per minute`` refused (429) on every
strategy as stock, never an error; limits' big moving windows accepted; ``async+ratelimit://``
working without coredis; a registration that survives ``ruff --fix``."""

from __future__ import annotations

import subprocess
import sys
import textwrap
from pathlib import Path

import pytest
import redis
from conftest import Server
from limits import parse
from limits.aio import strategies as aio_strategies
from limits.storage import storage_from_string
from limits.strategies import (
    FixedWindowRateLimiter,
    MovingWindowRateLimiter,
    RateLimiter,
    SlidingWindowCounterRateLimiter,
)

from redis_ratelimit.limits import AsyncModuleStorage, ModuleStorage, register

STRATEGIES = [FixedWindowRateLimiter, MovingWindowRateLimiter, SlidingWindowCounterRateLimiter]


@pytest.mark.parametrize("strategy", STRATEGIES)
def test_zero_per_minute_is_refused_as_stock(server: Server, raw: redis.Redis, strategy: type[RateLimiter]) -> None:
    limiter = strategy(ModuleStorage(f"ratelimit://127.0.0.1:{server.port}"))
    zero = parse("0 per minute")
    assert not limiter.hit(zero, "k")  # 429; a 500 (`limit must be an integer …`) before
    assert not limiter.test(zero, "k")
    assert limiter.get_window_stats(zero, "k").remaining == 0


@pytest.mark.parametrize("limit", ["1000000 per 2 seconds", "200000 per day"])
def test_big_moving_windows_work_on_a_default_loaded_module(server: Server, raw: redis.Redis, limit: str) -> None:
    assert raw.config_get("ratelimit.slide-log-max") == {"ratelimit.slide-log-max": "1000000"}
    limiter = MovingWindowRateLimiter(ModuleStorage(f"ratelimit://127.0.0.1:{server.port}"))
    item = parse(limit)
    assert all(limiter.hit(item, "big") for _ in range(50))
    assert limiter.get_window_stats(item, "big").remaining == item.amount - 50


def test_async_scheme_works_without_coredis(server: Server) -> None:
    """In a fresh interpreter where coredis cannot be imported."""
    program = textwrap.dedent(
        f"""
        import asyncio, sys
        sys.modules["coredis"] = None  # not installed
        from limits import parse
        from limits.aio.strategies import MovingWindowRateLimiter
        from limits.storage import storage_from_string
        from redis_ratelimit.limits import register
        register()

        async def main():
            storage = storage_from_string("async+ratelimit://127.0.0.1:{server.port}")
            limiter = MovingWindowRateLimiter(storage)
            hits = [await limiter.hit(parse("2 per minute"), "nocoredis") for _ in range(3)]
            print(hits)

        asyncio.run(main())
        """
    )
    src = str(Path(__file__).resolve().parents[1] / "src")
    done = subprocess.run(
        [sys.executable, "-c", program], env={"PYTHONPATH": src}, capture_output=True, text=True, timeout=60
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == "[True, True, False]"


async def test_the_async_default_is_redis_py_and_coredis_still_chosen_explicitly(server: Server) -> None:
    default = AsyncModuleStorage(f"async+ratelimit://127.0.0.1:{server.port}")
    assert type(default.bridge).__name__ != "CoredisBridge"
    chosen = AsyncModuleStorage(f"async+ratelimit://127.0.0.1:{server.port}", implementation="coredis")
    assert type(chosen.bridge).__name__ == "CoredisBridge"
    limiter = aio_strategies.MovingWindowRateLimiter(chosen)
    assert await limiter.hit(parse("1 per minute"), "explicit")


def test_register_is_a_use_that_ruff_fix_keeps(server: Server, tmp_path: Path) -> None:
    schemes = register()
    assert {"ratelimit", "ratelimit+cluster", "async+ratelimit", "async+ratelimit+sentinel"} <= set(schemes)
    assert type(storage_from_string(f"ratelimit://127.0.0.1:{server.port}")) is ModuleStorage
    app = tmp_path / "app.py"
    app.write_text(
        "from limits.storage import storage_from_string\n\n"
        "from redis_ratelimit.limits import register\n\n"
        "register()\n"
        'storage = storage_from_string("ratelimit://localhost:6379")\n'
    )
    before = app.read_text()
    ruff = Path(sys.executable).with_name("ruff")
    subprocess.run([str(ruff), "check", "--fix", "--select", "F,I", "--isolated", str(app)], check=False)
    assert app.read_text() == before
