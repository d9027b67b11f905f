"""The Flask-Limiter and FastAPI (SlowAPI, and this package's middleware) examples in
examples/python/, run as programs against a real server with the module."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import redis
from conftest import ROOT, Server

from redis_ratelimit import commands

PACKAGE_SRC = Path(__file__).resolve().parents[1] / "src"


def run_example(name: str, server: Server) -> list[str]:
    env = {**os.environ, "PYTHONPATH": str(PACKAGE_SRC)}
    done = subprocess.run(
        [sys.executable, str(ROOT / "examples/python" / name), f"127.0.0.1:{server.port}"],
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode == 0, done.stderr
    return done.stdout.splitlines()


def test_flask_limiter_example(server: Server, raw: redis.Redis) -> None:
    lines = run_example("flask_limiter_app.py", server)
    assert lines == [f"{i} 200 remaining={5 - i}" for i in range(1, 6)] + [
        "6 429 retry_after=60",
        "7 429 retry_after=60",
    ]
    (key,) = raw.keys("*")
    assert raw.type(key) != b"list"  # the moving window is the module's log, not a list
    info = commands.info(raw.execute_command("RL.INFO", key))  # RESP2 array or RESP3 map
    assert info is not None and info["algorithm"] == "slide"


def test_fastapi_example(server: Server, raw: redis.Redis) -> None:
    lines = run_example("fastapi_app.py", server)
    assert lines[:7] == [f"slowapi {i} {200 if i <= 5 else 429}" for i in range(1, 8)]
    assert lines[7:12] == [f'middleware {i} 200 "default";r={5 - i};t={60 * i}' for i in range(1, 6)]
    assert lines[12:] == [f'middleware {i} 429 "default";r=0;t=300 retry_after=60' for i in (6, 7)]
    assert raw.exists("ratelimit:key42")
