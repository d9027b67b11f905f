"""make bench-clients-python: limits' stock ``RedisStorage`` against this package's
``ModuleStorage``, side by side on one server (module loaded) in one run.

For each strategy and limit, each storage fills one key through limits' own strategy
(``hit()`` as Flask-Limiter and SlowAPI call it, sequentially, as fast as the client goes) until
the window is full (``limit`` admitted hits), and we read:

- server time per hit: ``INFO commandstats`` usec summed over every command, / hits
  (``CONFIG RESETSTAT`` before each fill);
- commands per hit: calls summed over every command, / hits;
- bytes per key with the full window: ``MEMORY USAGE key SAMPLES 0`` (both keys of stock's
  sliding-window counter).

Writes the table to the ``## Python`` section of ``bench/CLIENTS.md`` (other sections kept).
"""

from __future__ import annotations

import argparse
import os
import shutil
import socket
import subprocess
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable, List, Optional, Tuple

import redis
from limits import RateLimitItem, parse
from limits.storage import RedisStorage
from limits.strategies import (
    FixedWindowRateLimiter,
    MovingWindowRateLimiter,
    RateLimiter,
    SlidingWindowCounterRateLimiter,
)

from redis_ratelimit.limits import ModuleStorage

ROOT = Path(__file__).resolve().parents[3]
MODULE = Path(os.environ.get("RL_MODULE", ROOT / "target/release/libredis_ratelimit.so")).resolve()


def start_server() -> Tuple[subprocess.Popen[bytes], int, str]:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = int(s.getsockname()[1])
    workdir = tempfile.mkdtemp(prefix="rl-py-bench-")
    args = ["redis-server", "--port", str(port), "--bind", "127.0.0.1", "--save", "", "--appendonly", "no"]
    args += ["--dir", workdir, "--loadmodule", str(MODULE)]
    process = subprocess.Popen(args, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    deadline = time.monotonic() + 20
    while True:
        try:
            if redis.Redis(port=port).ping():
                return process, port, workdir
        except redis.ConnectionError:
            pass
        if process.poll() is not None or time.monotonic() > deadline:
            raise RuntimeError("redis-server did not start")
        time.sleep(0.02)


@dataclass
class Scenario:
    name: str
    limit: str
    strategy: Callable[[Any], RateLimiter]
    keys: Callable[[str, RateLimitItem], List[str]]


def one_key(prefix: str, item: RateLimitItem) -> List[str]:
    return [f"{prefix}:{item.key_for('bench')}"]


def window_keys(prefix: str, item: RateLimitItem) -> List[str]:
    """Stock's sliding-window counter uses two keys; the module's one (the first name)."""
    key = item.key_for("bench")
    return [f"{prefix}:{{{key}}}", f"{prefix}:{{{key}}}/-1"]


SCENARIOS = [
    Scenario("moving window", "1000/minute", MovingWindowRateLimiter, one_key),
    Scenario("moving window", "100000/day", MovingWindowRateLimiter, one_key),
    Scenario("sliding window counter", "1000/minute", SlidingWindowCounterRateLimiter, window_keys),
    Scenario("fixed window", "1000/minute", FixedWindowRateLimiter, one_key),
]


@dataclass
class Result:
    usec_per_hit: float
    sent_per_hit: float
    commands_per_hit: float
    bytes_per_key: int
    entries: Optional[int]


def measure(raw: redis.Redis, storage: Any, prefix: str, scenario: Scenario) -> Result:
    item = parse(scenario.limit)
    limiter = scenario.strategy(storage)
    raw.config_resetstat()
    hits = item.amount
    for _ in range(hits):
        if not limiter.hit(item, "bench"):
            raise RuntimeError(f"{scenario.name} {scenario.limit}: a hit was refused before the window was full")
    stats = raw.info("commandstats")
    work = {name: v for name, v in stats.items() if not name.startswith(("cmdstat_info", "cmdstat_config"))}
    # What the client sent: scripts (their time includes the commands they run) and module
    # commands; a fill sends nothing else. The commands a script runs are counted apart too.
    sent = {name: v for name, v in work.items() if name.startswith(("cmdstat_eval", "cmdstat_rl.", "cmdstat_cl."))}
    usec = sum(float(v["usec"]) for v in sent.values())
    calls = sum(int(v["calls"]) for v in work.values())
    if not 0 <= sum(int(v["calls"]) for v in sent.values()) - hits <= 2:  # stock: + NOSCRIPT retry
        raise RuntimeError(f"unexpected commands during the fill: {sorted(work)}")
    size = 0
    for key in scenario.keys(prefix, item):
        size += int(raw.memory_usage(key, samples=0) or 0)
    entries = None
    info = raw.execute_command("RL.INFO", scenario.keys(prefix, item)[0]) if prefix == "MODULE" else None
    if info:
        fields = dict(zip(info[::2], info[1::2]))
        entries = int(fields.get(b"entries", 0))
    return Result(usec / hits, sum(int(v["calls"]) for v in sent.values()) / hits, calls / hits, size, entries)


ROUNDS = 5


def median(runs: List[Result]) -> Result:
    """The run with the median server time (its other figures with it)."""
    return sorted(runs, key=lambda r: r.usec_per_hit)[len(runs) // 2]


def spread_log_bytes(raw: redis.Redis, limit: int, window_ms: int) -> int:
    """The module's worst case: a full exact log whose hits all fell in distinct ms (the
    command the storage sends, with ``AT`` one ms apart), as ``MEMORY USAGE``."""
    key = "MODULE:spread"
    now_ms = int(raw.time()[0]) * 1000
    for start in range(0, limit, 1000):
        pipe = raw.pipeline(transaction=False)
        for i in range(start, min(limit, start + 1000)):
            pipe.execute_command("RL.SLIDE", key, limit, window_ms, "AT", now_ms - limit + i)
        if not all(reply[0] for reply in pipe.execute()):
            raise RuntimeError("a spread hit was refused")
    return int(raw.memory_usage(key, samples=0) or 0)


def has_anchor_floor(raw: redis.Redis) -> bool:
    try:
        raw.execute_command("RL.SLIDE", "probe", 1, 1000, "BUCKETS", 1, "ANCHOR", "FLOOR", "DRYRUN")
        return True
    except redis.ResponseError:
        return False


def table(rows: List[Tuple[Scenario, Result, Optional[Result]]], server: str, spread: int) -> str:
    lines = [
        "## Python",
        "",
        "`make bench-clients-python` (clients/python/bench/bench.py): limits 5.8.0's stock `RedisStorage`",
        "(Lua over strings and lists) against `redis_ratelimit.limits.ModuleStorage` (one module command",
        f"per call), on one {server} server with the module loaded, in one run. Each storage fills one key",
        "through limits' own strategy `hit()` (as Flask-Limiter and SlowAPI call it; one client, sequential)",
        "until the window holds `limit` hits; stock and module alternate, 5 rounds each, the round with",
        "the median server time is shown. Server time: `INFO commandstats` usec of the commands the",
        "client sent (stock: `EVALSHA`, whose time includes the commands its script runs; module: `RL.*`),",
        "per hit. Commands: every command the server ran, those inside Lua included (`INFO commandstats`",
        "calls), per hit; both storages send one command per hit. Bytes: `MEMORY USAGE key SAMPLES 0` of",
        "the full key (stock's sliding-window counter: its two keys).",
        "",
        "| strategy | limit | server µs/hit stock | module | ratio | commands/hit stock | module "
        "| bytes/key stock | module | ratio |",
        "|---|---|---:|---:|---:|---:|---:|---:|---:|---:|",
    ]
    for scenario, stock, module in rows:
        if module is None:
            lines.append(
                f"| {scenario.name} | {scenario.limit} | {stock.usec_per_hit:.2f} | n/a | | "
                f"{stock.commands_per_hit:.2f} | n/a | {stock.bytes_per_key:,} | n/a | |"
            )
            continue
        lines.append(
            f"| {scenario.name} | {scenario.limit} | {stock.usec_per_hit:.2f} | {module.usec_per_hit:.2f} | "
            f"{module.usec_per_hit / stock.usec_per_hit:.2f} | {stock.commands_per_hit:.2f} | "
            f"{module.commands_per_hit:.2f} | {stock.bytes_per_key:,} | {module.bytes_per_key:,} | "
            f"{module.bytes_per_key / stock.bytes_per_key:.3f} |"
        )
    lines.append("")
    entries = ", ".join(f"{c.limit} → {m.entries:,}" for c, _, m in rows if m and m.entries and "moving" in c.name)
    daily = next(s.bytes_per_key for c, s, _ in rows if c.limit == "100000/day")
    notes = [
        f"- Module log entries in the full key (same-ms hits merge into one entry): {entries}."
        " Stock keeps one list element per hit whatever the spacing.",
        "- Worst case for the module, every hit in its own ms (100000/day filled with `AT` one ms apart):"
        f" {spread:,} bytes, {spread / max(1, daily):.3f} × stock's full key.",
        "- `n/a`: the module of this run lacks `RL.SLIDE … BUCKETS 1 ANCHOR FLOOR` (limits' sliding-window counter).",
    ]
    notes.insert(
        2,
        "- Stock's sliding-window counter holds one key until its first period ends, then two"
        " (current and previous, each a string with a TTL); the module's is one key throughout.",
    )
    lines += notes if any(m is None for _, _, m in rows) else notes[:-1]
    for c, st, m in rows:
        if c.limit == "100000/day" and m is not None:
            size, usec = m.bytes_per_key / st.bytes_per_key, m.usec_per_hit / st.usec_per_hit
            lines.append(
                f"- Bars, moving window 100000/day: bytes per full key {size:.3f} × stock's (≤ 0.15: "
                f"{'met' if size <= 0.15 else 'NOT met'}), server time per hit {usec:.2f} × stock's (≤ 0.2: "
                f"{'met' if usec <= 0.2 else 'NOT met'})."
            )
    return "\n".join(lines) + "\n"


def write_section(path: Path, section: str) -> None:
    text = path.read_text() if path.exists() else "# Client packages: benchmarks\n\n"
    start = text.find("## Python")
    if start < 0:
        text = text.rstrip("\n") + "\n\n" + section
    else:
        end = text.find("\n## ", start + 1)
        text = text[:start] + section + ("" if end < 0 else "\n" + text[end + 1 :])
    path.write_text(text)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("--write", type=Path, help="bench/CLIENTS.md to update")
    a = parser.parse_args()
    process, port, workdir = start_server()
    try:
        raw = redis.Redis(port=port)
        version = raw.info("server")["redis_version"]
        stock = RedisStorage(f"redis://127.0.0.1:{port}", key_prefix="STOCK")
        module = ModuleStorage(f"ratelimit://127.0.0.1:{port}", key_prefix="MODULE")
        anchor = has_anchor_floor(raw)
        rows: List[Tuple[Scenario, Result, Optional[Result]]] = []
        for scenario in SCENARIOS:
            stock_runs: List[Result] = []
            module_runs: List[Result] = []
            for _ in range(ROUNDS):  # alternated, medians: the machine is shared and noisy
                raw.flushall()
                stock_runs.append(measure(raw, stock, "STOCK", scenario))
                if anchor or "sliding" not in scenario.name:
                    raw.flushall()
                    module_runs.append(measure(raw, module, "MODULE", scenario))
            s = median(stock_runs)
            m = median(module_runs) if module_runs else None
            rows.append((scenario, s, m))
            print(f"{scenario.name} {scenario.limit}: stock {s} module {m}", flush=True)
        raw.flushall()
        spread = spread_log_bytes(raw, 100_000, 86_400_000)
        section = table(rows, f"Redis {version}", spread)
        print(section)
        if a.write:
            write_section(a.write, section)
    finally:
        process.terminate()
        process.wait(10)
        shutil.rmtree(workdir, ignore_errors=True)


if __name__ == "__main__":
    main()
