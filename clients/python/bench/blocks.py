"""make bench-blocks-python: :class:`PermitBlock` on one hot key, 8 client processes (one
thread each, redis-py sync), one server (module loaded), block sizes 1, 10 and 100.

- throughput: a token bucket that never binds, ``BLOCKS_SECONDS`` (default 3) s per size:
  decisions/s of all processes together, and the server's CPU time (``/proc/<pid>/stat`` utime +
  stime) per decision;
- binding: a pool of ``POOL`` permits (a token bucket refilled 1/h) drained by all processes:
  over-admission = admitted − (pool − tokens left after every ``close()``), from the server's
  ``RL.INFO`` (must be 0), and the peak under-use: in 5 ms bins, the permits the other processes
  held while one was refused, against the bound processes × blocks × size.

Writes the ``## Permit blocks (Python)`` section of ``bench/CLIENTS.md`` (other sections kept).
"""

from __future__ import annotations

import argparse
import multiprocessing
import os
import shutil
import time
from pathlib import Path
from typing import Any, Dict, List, Set, Tuple

import redis

from bench import start_server
from redis_ratelimit import PermitBlock, RateLimit, Token

PROCESSES = 8
SECONDS = float(os.environ.get("BLOCKS_SECONDS", "3"))
SIZES = [1, 10, 100]
POOL = 20_000
BIN_S = 0.005
HEADING = "## Permit blocks (Python)"


def worker(args: Tuple[int, str, Token, int, bool, float, float]) -> Dict[str, Any]:
    port, key, limit, size, binding, start_at, stop_at = args
    block = PermitBlock(RateLimit(redis.Redis(port=port)), key, limit, size=size, lifetime=1000)
    held: Dict[int, int] = {}
    refused_bins: Set[int] = set()
    admitted = refused = misses = 0
    while time.time() < start_at:
        time.sleep(0.001)
    while time.time() < stop_at:
        d = block.take()
        b = int(time.time() / BIN_S)
        if d.allowed:
            admitted += 1
            misses = 0
        else:
            refused += 1
            refused_bins.add(b)
            misses += 1
            if binding and misses > 50:
                break  # the pool is spent
        if binding:
            held[b] = max(held.get(b, 0), block.held)
    block.close()
    s = block.stats
    return {
        "admitted": admitted,
        "refused": refused,
        "calls": s.calls + s.refunds,
        "held": held,
        "refused_bins": refused_bins,
    }


def cpu_ticks(pid: int) -> int:
    stat = Path(f"/proc/{pid}/stat").read_text()
    fields = stat[stat.rindex(")") + 2 :].split()
    return int(fields[11]) + int(fields[12])  # utime + stime


def run(pool: Any, port: int, key: str, limit: Token, size: int, binding: bool, seconds: float) -> List[Dict[str, Any]]:
    start_at = time.time() + 1.0
    args = (port, key, limit, size, binding, start_at, start_at + seconds)
    return list(pool.map(worker, [args] * PROCESSES))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("--write", type=Path, help="bench/CLIENTS.md to update")
    a = parser.parse_args()
    process, port, workdir = start_server()
    hz = os.sysconf("SC_CLK_TCK")
    rows = []
    try:
        raw = RateLimit(redis.Redis(port=port))
        with multiprocessing.get_context("fork").Pool(PROCESSES) as pool:
            for size in SIZES:
                t0 = cpu_ticks(process.pid)
                open_results = run(pool, port, f"open:{size}", Token(10**12, 10**12, "1s"), size, False, SECONDS)
                ticks = cpu_ticks(process.pid) - t0
                decisions = sum(r["admitted"] + r["refused"] for r in open_results)
                calls = sum(r["calls"] for r in open_results)
                pkey = f"pool:{size}"
                bound_results = run(pool, port, pkey, Token(POOL, 1, "1h"), size, True, 20.0)
                info = raw.limiter_info(pkey)
                consumed = POOL - int(info["tokens"]) if info is not None else POOL
                admitted = sum(r["admitted"] for r in bound_results)
                peak = 0
                for i, r in enumerate(bound_results):
                    for b in r["refused_bins"]:
                        others = sum(o["held"].get(b, 0) for j, o in enumerate(bound_results) if j != i)
                        peak = max(peak, others)
                row = {
                    "size": size,
                    "per_s": decisions / SECONDS,
                    "cpu_us": ticks / hz * 1e6 / decisions,
                    "calls": calls / decisions,
                    "over": max(0, admitted - consumed),
                    "admitted": admitted,
                    "consumed": consumed,
                    "peak": peak,
                    "bound": PROCESSES * size,
                }
                print(row, flush=True)
                rows.append(row)
    finally:
        process.terminate()
        process.wait()
        shutil.rmtree(workdir, ignore_errors=True)
    base = rows[0]
    lines = [
        HEADING,
        "",
        f"`make bench-blocks-python` (clients/python/bench/blocks.py, {time.strftime('%Y-%m-%d')}): one hot key,",
        f"{PROCESSES} Python processes (sync `PermitBlock` over redis-py, one thread each, lifetime 1 s, one block",
        f"per process), one server, loopback, {os.cpu_count()} cores shared by all; {SECONDS:g} s per size; the same",
        "measures as the Node section above. Block size 1 is one module call per decision.",
        "",
        "| block size | decisions/s | × size 1 | server CPU µs/decision | × size 1 | server calls/decision"
        " | over-admission (pool) | peak under-use | bound |",
        "|---:|---:|---:|---:|---:|---:|---:|---:|---:|",
    ]
    for r in rows:
        lines.append(
            f"| {r['size']} | {r['per_s']:.0f} | {r['per_s'] / base['per_s']:.2f} | {r['cpu_us']:.2f}"
            f" | {r['cpu_us'] / base['cpu_us']:.3f} | {r['calls']:.4f}"
            f" | {r['over']} ({r['admitted']} admitted, {r['consumed']} consumed) | {r['peak']} | {r['bound']} |"
        )
    top = rows[-1]
    met = (
        top["per_s"] >= 5 * base["per_s"]
        and top["cpu_us"] <= 0.2 * base["cpu_us"]
        and all(r["over"] == 0 for r in rows)
    )
    lines += [
        "",
        "Issue 26's target for blocks of 100 (≥ 5 × the decisions/s of size 1 at ≤ 0.2 × its server CPU per"
        f" decision, 0 over-admission): {'met' if met else 'NOT met'}.",
    ]
    if a.write:
        text = a.write.read_text()
        section = "\n".join(lines) + "\n"
        start = text.find(f"\n{HEADING}\n")
        if start < 0:
            text = text.rstrip("\n") + "\n\n" + section
        else:
            end = text.find("\n## ", start + 1)
            text = text[: start + 1] + section + ("" if end < 0 else text[end:])
        a.write.write_text(text)
    else:
        print("\n".join(lines))


if __name__ == "__main__":
    main()
