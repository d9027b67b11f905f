#!/usr/bin/env python3
"""The measurements of `make bench` (SPEC §5), run by bench/run.sh against the redis-server
it started (module loaded, no persistence). Standard library only.

For every command — INCR (the floor), each RL.* command, CL.THROTTLE, and the Lua twin of
each algorithm (bench/lua/*.lua, run with EVALSHA) — and for random keys (-r) and one hot key,
at -P 1 and -P 16, it runs redis-benchmark REPS times, the variants alternated (A B C … A B C …),
and reports medians of: ops/s, p50/p99 latency (redis-benchmark --csv) and the server time per
call (INFO commandstats after CONFIG RESETSTAT). Then memory: the used_memory delta over
MEM_KEYS keys each created by one admitted call, and the bytes per extra RL.SLIDE log entry.
Last, one hot key hammered by 1000 concurrent clients must admit exactly its limit, no error.

Environment (set by run.sh): REDIS_HOST, REDIS_PORT, MODULE, RESULTS, BENCH_DIR,
CLIENT_CPU (a taskset prefix or empty), MACHINE_NPROC. Tuning, with defaults:
BENCH_REPS (5 rounds), BENCH_N_P1 (40000 requests per -P 1 run), BENCH_N_P16 (150000),
BENCH_CLIENTS (50), BENCH_KEYSPACE (100000), BENCH_MEM_KEYS (100000),
BENCH_SLIDE_ENTRIES (100000).

Then, when run.sh found redis-cell (CELL_MODULE), the side-by-side comparison of our
CL.THROTTLE with redis-cell's on two more servers, standalone and with replicas (see
cell_comparison); BENCH_ONLY=cell runs only that and replaces only its section of RESULTS.
Also set by run.sh: SERVER_CPU (the server's taskset prefix), BENCH_WORK (a scratch
directory), CELL_SKIPPED (why there is no redis-cell). BENCH_DIVERGENCE_KEYS (1000).
"""

import csv
import datetime
import io
import os
import platform
import shlex
import signal
import statistics
import subprocess
import sys
import threading
import time
from dataclasses import dataclass, field

import report
import resp
from resp import ReplyError


def env_int(name, default):
    value = os.environ.get(name, "")
    return int(value) if value else default


HOST = os.environ.get("REDIS_HOST", "127.0.0.1")
PORT = env_int("REDIS_PORT", 6379)
MODULE = os.environ.get("MODULE", "")
BENCH_DIR = os.environ.get("BENCH_DIR", os.path.dirname(os.path.abspath(__file__)))
RESULTS = os.environ.get("RESULTS", os.path.join(BENCH_DIR, "RESULTS.md"))
CLIENT_CPU = shlex.split(os.environ.get("CLIENT_CPU", ""))
REPS = env_int("BENCH_REPS", 5)
N_BY_PIPELINE = {1: env_int("BENCH_N_P1", 40_000), 16: env_int("BENCH_N_P16", 150_000)}
CLIENTS = env_int("BENCH_CLIENTS", 50)
KEYSPACE = env_int("BENCH_KEYSPACE", 100_000)
MEM_KEYS = env_int("BENCH_MEM_KEYS", 100_000)
SLIDE_ENTRIES = env_int("BENCH_SLIDE_ENTRIES", 100_000)
PIPELINES = (1, 16)
KEYMODES = ("random", "hot")

# SPEC §5 bars.
BAR_USEC = 1.5  # server time per call ≤ 1.5 × INCR
BAR_P16 = 0.8  # throughput ≥ 0.8 × INCR at -P 16
BAR_P1 = 0.95  # throughput ≥ 0.95 × INCR at -P 1
BAR_LUA = 4.0  # throughput ≥ 4 × the Lua twin at -P 16
BAR_BYTES_KEY = 150  # bytes per key of the five common limiters
BAR_BYTES_FORM = 165.7  # bytes per key of every other fixed-size form (redis-cell's figure)
BAR_BYTES_ENTRY = 16  # bytes per extra RL.SLIDE log entry

HOUR_MS = 3_600_000


# ---------------------------------------------------------------------------------------------
# The RESP2 client (bench/resp.py), connecting to the bench server by default.


class Redis(resp.Redis):
    def __init__(self, host=HOST, port=PORT):
        super().__init__(host, port)


# ---------------------------------------------------------------------------------------------
# What is measured.


@dataclass
class Variant:
    name: str  # shown in the table
    stat: str  # its INFO commandstats name
    args: list  # the command, "{key}" standing for the key
    prefix: str  # key prefix, distinct per variant
    twin: str = ""  # the Lua twin's name (for native commands)
    mem_args: list = field(default_factory=list)  # one admitted call with a long TTL
    mem_bar: bool = False  # held to the 200 bytes-per-key bar
    native: bool = False
    admitted: object = None  # reply → admitted? (for the memory load check)
    sha: str = ""  # Lua variants: the script's SHA1, filled after SCRIPT LOAD
    script: str = ""  # Lua variants: the script's file under bench/lua/

    def command(self, key):
        return [a.replace("{key}", key).replace("{sha}", self.sha) for a in self.args]

    def mem_command(self, key):
        return [a.replace("{key}", key).replace("{sha}", self.sha) for a in self.mem_args]


def rl_admitted(reply):
    return isinstance(reply, list) and reply[:1] == [1]


def cell_admitted(reply):  # CL.THROTTLE's first field is "limited"
    return isinstance(reply, list) and reply[:1] == [0]


# Typical parameters: 100 per minute (burst 100, refilled 10 per minute for the buckets). A key
# outlives a run (TTL ≥ 6 s), so random keys are created and then updated in the same
# proportion as INCR's (no churn through expiry) and are all admitted: the write path. The hot
# key soon runs out and is mostly limited: the read-only path. Memory: the same algorithms
# with an hour-long period, so no key expires while it is counted.
VARIANTS = [
    Variant("INCR", "incr", ["INCR", "{key}"], "incr",
            mem_args=["INCR", "{key}"], admitted=lambda r: r == 1),
    Variant("RL.TOKEN", "rl.token", ["RL.TOKEN", "{key}", "100", "10", "1m"], "tok",
            twin="Lua token bucket", native=True, mem_bar=True, admitted=rl_admitted,
            mem_args=["RL.TOKEN", "{key}", "100", "1", "1h"]),
    Variant("RL.PERIOD", "rl.period", ["RL.PERIOD", "{key}", "100", "1m"], "per",
            twin="Lua fixed window", native=True, mem_bar=True, admitted=rl_admitted,
            mem_args=["RL.PERIOD", "{key}", "100", "1h"]),
    Variant("RL.SLIDE", "rl.slide", ["RL.SLIDE", "{key}", "100", "1m"], "sld",
            twin="Lua sliding log", native=True, mem_bar=True, admitted=rl_admitted,
            mem_args=["RL.SLIDE", "{key}", "100", "1h"]),
    Variant("RL.LEAKY", "rl.leaky", ["RL.LEAKY", "{key}", "100", "10", "1m"], "lky",
            twin="Lua leaky bucket", native=True, mem_bar=True, admitted=rl_admitted,
            mem_args=["RL.LEAKY", "{key}", "100", "1", "1h"]),
    Variant("CL.THROTTLE", "cl.throttle", ["CL.THROTTLE", "{key}", "99", "10", "60"], "thr",
            twin="Lua GCRA", native=True, mem_bar=True, admitted=cell_admitted,
            mem_args=["CL.THROTTLE", "{key}", "99", "1", "3600"]),
    Variant("Lua token bucket", "evalsha",
            ["EVALSHA", "{sha}", "1", "{key}", "100", "10", "60000", "1"], "ltok",
            script="token_bucket.lua", admitted=rl_admitted,
            mem_args=["EVALSHA", "{sha}", "1", "{key}", "100", "1", str(HOUR_MS), "1"]),
    Variant("Lua fixed window", "evalsha",
            ["EVALSHA", "{sha}", "1", "{key}", "100", "60000", "1"], "lper",
            script="fixed_window.lua", admitted=rl_admitted,
            mem_args=["EVALSHA", "{sha}", "1", "{key}", "100", str(HOUR_MS), "1"]),
    Variant("Lua sliding log", "evalsha",
            ["EVALSHA", "{sha}", "1", "{key}", "100", "60000", "1"], "lsld",
            script="sliding_log.lua", admitted=rl_admitted,
            mem_args=["EVALSHA", "{sha}", "1", "{key}", "100", str(HOUR_MS), "1"]),
    Variant("Lua leaky bucket", "evalsha",
            ["EVALSHA", "{sha}", "1", "{key}", "100", "10", "60000", "1"], "llky",
            script="leaky_bucket.lua", admitted=rl_admitted,
            mem_args=["EVALSHA", "{sha}", "1", "{key}", "100", "1", str(HOUR_MS), "1"]),
    Variant("Lua GCRA", "evalsha",
            ["EVALSHA", "{sha}", "1", "{key}", "99", "10", "60", "1"], "lthr",
            script="gcra.lua", admitted=cell_admitted,
            mem_args=["EVALSHA", "{sha}", "1", "{key}", "99", "1", "3600", "1"]),
]
BY_NAME = {v.name: v for v in VARIANTS}

# Memory only: the other forms a limiter takes (name, one admitted call, held to
# BAR_BYTES_FORM or not). Sliding logs of several entries, bucket rings, leases and bans may be
# larger (SPEC §5); a one-entry log is the RL.SLIDE row above.
FORMS = [
    ("RL.TOKEN … STEP", ["RL.TOKEN", "{key}", "100", "1", "1h", "STEP"], True),
    ("RL.PERIOD … ALIGN", ["RL.PERIOD", "{key}", "100", "1h", "ALIGN"], True),
    ("RL.LEAKY … NODELAY", ["RL.LEAKY", "{key}", "100", "1", "1h", "NODELAY"], True),
    ("RL.LEAKY … DELAY 10", ["RL.LEAKY", "{key}", "100", "1", "1h", "DELAY", "10"], True),
    ("CL.THROTTLE 9 1 60", ["CL.THROTTLE", "{key}", "9", "1", "60"], True),
    ("RL.PERIOD 1000000 1d", ["RL.PERIOD", "{key}", "1000000", "1d"], True),
    ("RL.TOKEN 1000000 1000 1d", ["RL.TOKEN", "{key}", "1000000", "1000", "1d"], True),
    ("RL.SLIDE … BUCKETS 10 (a ring)", ["RL.SLIDE", "{key}", "100", "1h", "BUCKETS", "10"],
     False),
    ("RL.ACQUIRE (one lease)", ["RL.ACQUIRE", "{key}", "10", "1h"], False),
]


@dataclass
class Sample:
    rps: float
    p50: float
    p99: float
    usec: float  # server time per call


def log(msg):
    print(msg, file=sys.stderr, flush=True)


def median(values):
    return statistics.median(values) if values else None


# ---------------------------------------------------------------------------------------------
# Runs.


def key_for(variant, keymode):
    return f"{variant.prefix}:__rand_int__" if keymode == "random" else f"{variant.prefix}:hot"


def benchmark(r, variant, keymode, pipeline, n):
    """One redis-benchmark run on an empty database with fresh command statistics."""
    r.call("FLUSHALL", "SYNC")
    r.wait_replicas()  # with a replica attached: it has flushed too before anything is timed
    r.call("CONFIG", "RESETSTAT")
    cmd = CLIENT_CPU + [
        "redis-benchmark", "-h", r.host, "-p", str(r.port), "-c", str(CLIENTS), "-n", str(n),
        "-P", str(pipeline), "--csv",
    ]
    if keymode == "random":
        cmd += ["-r", str(KEYSPACE)]
    cmd += variant.command(key_for(variant, keymode))
    out = subprocess.run(cmd, capture_output=True, text=True, check=True).stdout
    rows = [row for row in csv.reader(io.StringIO(out)) if row and row[0] != "test"]
    if not rows:
        raise RuntimeError(f"no result from {shlex.join(cmd)}:\n{out}")
    header = ["test", "rps", "avg", "min", "p50", "p95", "p99", "max"]
    row = dict(zip(header, rows[-1]))
    calls, usec, failed = r.command_stats(variant.stat)
    # The replica catches up before anything else runs (its work is not the next run's).
    r.wait_replicas()
    if calls < n or failed:
        errors = r.info("errorstats")
        raise RuntimeError(
            f"{variant.name} ({keymode}, -P {pipeline}): {calls} calls of {n}, "
            f"{failed} failed; errorstats {errors}"
        )
    return Sample(
        rps=float(row["rps"]),
        p50=float(row["p50"]),
        p99=float(row["p99"]),
        usec=usec / calls,
    )


def run_throughput(r, variants):
    """REPS rounds; in each, every variant once per key mode and pipeline depth (alternated)."""
    samples = {}  # (name, keymode, pipeline) -> [Sample]
    log("warm-up …")
    for v in variants:
        for keymode in KEYMODES:
            benchmark(r, v, keymode, 16, 20_000)
    for rep in range(1, REPS + 1):
        for keymode in KEYMODES:
            for pipeline in PIPELINES:
                started = time.monotonic()
                for v in variants:
                    s = benchmark(r, v, keymode, pipeline, N_BY_PIPELINE[pipeline])
                    samples.setdefault((v.name, keymode, pipeline), []).append(s)
                log(f"round {rep}/{REPS}: {keymode} keys, -P {pipeline} "
                    f"({time.monotonic() - started:.1f}s)")
    return samples


# ---------------------------------------------------------------------------------------------
# Memory.


def settled_used_memory(r):
    """used_memory once it stops moving (incremental rehashing, freed client buffers)."""
    last = int(r.info("memory")["used_memory"])
    for _ in range(20):
        time.sleep(0.1)
        now = int(r.info("memory")["used_memory"])
        if now == last:
            return now
        last = now
    return last


def load(commands, admitted=None, via=None):
    """Runs the commands pipelined on a connection of their own (to the server of connection
    `via`, by default the bench server), closed before returning so its buffers are not
    counted; checks there was no error (and every call was admitted)."""
    bulk = Redis(via.host, via.port) if via else Redis()
    try:
        replies = bulk.pipeline(commands)
    finally:
        bulk.close()
    errors = [x for x in replies if isinstance(x, ReplyError)]
    if errors:
        raise RuntimeError(f"{len(errors)} errors loading keys, first: {errors[0]}")
    if admitted is not None:
        refused = [x for x in replies if not admitted(x)]
        if refused:
            raise RuntimeError(f"{len(refused)} calls not admitted, first reply: {refused[0]}")
    return replies


def mem_key(i):
    return f"mem:{i:012d}"  # the shape of redis-benchmark's __rand_int__ keys


def memory_per_key(r, v):
    """used_memory delta per key over MEM_KEYS keys, each created by one admitted call (with a
    TTL), plus MEMORY USAGE of one of them as a cross-check."""
    r.call("FLUSHALL", "SYNC")
    base = settled_used_memory(r)
    commands = [v.mem_command(mem_key(i)) for i in range(MEM_KEYS)]
    if v.name == "INCR":  # a counter with a TTL, as the INCR + PEXPIRE idiom leaves it
        commands = [c for i in range(MEM_KEYS)
                    for c in (["INCR", mem_key(i)], ["PEXPIRE", mem_key(i), HOUR_MS])]
        load(commands, via=r)
    else:
        load(commands, v.admitted, via=r)
    after = settled_used_memory(r)
    keys = r.call("DBSIZE")
    if keys != MEM_KEYS:
        raise RuntimeError(f"{v.name}: {keys} keys after loading {MEM_KEYS}")
    sample = mem_key(MEM_KEYS // 2)
    if r.call("PTTL", sample) <= 0:
        raise RuntimeError(f"{v.name}: key {sample} has no TTL")
    usage = r.call("MEMORY", "USAGE", sample, "SAMPLES", "0")
    r.call("FLUSHALL", "SYNC")
    return (after - base) / MEM_KEYS, usage


def forms_memory_table(r):
    """Bytes per key of the other forms (FORMS), as memory_per_key measures them."""
    rows = ["| form | bytes/key | bar | MEMORY USAGE |", "|---|---|---|---|"]
    for name, args, held in FORMS:
        v = Variant(name, "", [], "form", mem_args=args, admitted=lambda reply: True)
        try:
            per_key, usage = memory_per_key(r, v)
        except Exception as e:  # a form this build lacks: say so, measure the rest
            rows.append(f"| {name} | n/a ({e}) | — | — |")
            continue
        bar = (f"≤ {BAR_BYTES_FORM} {'pass' if per_key <= BAR_BYTES_FORM else 'FAIL'}"
               if held else "none (may be larger)")
        rows.append(f"| `{' '.join(args).replace('{key}', 'k')}` | {per_key:.1f} | {bar} | "
                    f"{usage} |")
    return "Memory per key of the other forms:\n\n" + "\n".join(rows)


def memory_per_entry(r, make_command, admitted):
    """Bytes per extra log entry: one key filled with SLIDE_ENTRIES entries spread evenly
    over an hour (as a full log at a steady rate looks), against the same key with one."""
    t0 = int(r.call("TIME")[0]) * 1000
    spacing = max(1, HOUR_MS // SLIDE_ENTRIES)

    def fill(n):
        r.call("FLUSHALL", "SYNC")
        base = settled_used_memory(r)
        load([make_command(t0 + i * spacing) for i in range(n)], admitted, via=r)
        used = settled_used_memory(r) - base
        r.call("FLUSHALL", "SYNC")
        return used

    one = fill(1)
    full = fill(SLIDE_ENTRIES)
    return (full - one) / (SLIDE_ENTRIES - 1)


# ---------------------------------------------------------------------------------------------
# One hot key, many concurrent clients: the exact admission count (SPEC §5).

HOT_CLIENTS = 1000
HOT_PER_CLIENT = 20
HOT_LIMIT = 5000
# Limit HOT_LIMIT with (almost) no refill within the run, so exactly HOT_LIMIT are admitted.
HOT_CHECKS = {
    "RL.TOKEN": ["RL.TOKEN", "hot:tok", str(HOT_LIMIT), "1", "1h"],
    "RL.PERIOD": ["RL.PERIOD", "hot:per", str(HOT_LIMIT), "1h"],
    "RL.SLIDE": ["RL.SLIDE", "hot:sld", str(HOT_LIMIT), "1h"],
    "RL.LEAKY": ["RL.LEAKY", "hot:lky", str(HOT_LIMIT), "1", "1h"],
    "CL.THROTTLE": ["CL.THROTTLE", "hot:thr", str(HOT_LIMIT - 1), "1", "3600"],
}


def hot_key_check(r, v):
    """HOT_CLIENTS connections, started together, each sending HOT_PER_CLIENT requests to one
    key; every reply is counted here (not from the module's counters)."""
    r.call("FLUSHALL", "SYNC")
    command = HOT_CHECKS[v.name]
    admitted, errors, failures = [0], [0], []
    lock = threading.Lock()
    start = threading.Barrier(HOT_CLIENTS)

    def client():
        try:
            c = Redis()
        except OSError as e:
            with lock:
                failures.append(e)
            start.abort()
            return
        try:
            start.wait()
            mine_ok = mine_err = 0
            for _ in range(HOT_PER_CLIENT):
                c.sock.sendall(Redis.encode(command))
                reply = c.read()
                if isinstance(reply, ReplyError):
                    mine_err += 1
                elif v.admitted(reply):
                    mine_ok += 1
            with lock:
                admitted[0] += mine_ok
                errors[0] += mine_err
        except (OSError, threading.BrokenBarrierError, ConnectionError) as e:
            with lock:
                failures.append(e)
        finally:
            c.close()

    threading.stack_size(256 * 1024)
    threads = [threading.Thread(target=client) for _ in range(HOT_CLIENTS)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    r.call("FLUSHALL", "SYNC")
    if failures:
        return f"{v.name}: FAIL ({len(failures)} clients failed: {failures[0]})"
    ok = admitted[0] == HOT_LIMIT and errors[0] == 0
    return (f"{v.name}: {admitted[0]:,} of {HOT_CLIENTS * HOT_PER_CLIENT:,} admitted "
            f"(exactly {HOT_LIMIT:,} expected), {errors[0]} errors: {'pass' if ok else 'FAIL'}")


# ---------------------------------------------------------------------------------------------
# The table.


def fmt_int(x):
    return "—" if x is None else f"{x:,.0f}"


def verdict(ratio, ok):
    return f"{ratio:.2f} {'pass' if ok else 'FAIL'}"


def build_table(samples, memory, entry_bytes, present):
    def med(name, keymode, pipeline, attr):
        runs = samples.get((name, keymode, pipeline), [])
        return median([getattr(s, attr) for s in runs])

    def usec(name, keymode):  # at -P 16: the steadiest (-P 1 figures are in the raw samples)
        return med(name, keymode, 16, "usec")

    head = ["command", "keys",
            "ops/s -P1", "p50/p99 ms -P1", "ops/s -P16", "p50/p99 ms -P16",
            "server µs/call -P16", "µs ÷ INCR ≤1.5",
            "ops ÷ INCR -P16 ≥0.8", "ops ÷ INCR -P1 ≥0.95", "ops ÷ Lua -P16 ≥4",
            "bytes/key ≤150", "MEMORY USAGE"]
    rows = []
    for v in VARIANTS:
        for keymode in KEYMODES:
            if v.name not in present:
                if keymode == "random":
                    rows.append([v.name, "—"] + ["n/a"] * (len(head) - 2))
                continue
            cells = [v.name, keymode]
            for p in PIPELINES:
                cells.append(fmt_int(med(v.name, keymode, p, "rps")))
                cells.append(f"{med(v.name, keymode, p, 'p50'):.3f} / "
                             f"{med(v.name, keymode, p, 'p99'):.3f}")
            us = usec(v.name, keymode)
            cells.append(f"{us:.3f}")
            if v.native:
                floor = usec("INCR", keymode)
                cells.append(verdict(us / floor, us <= BAR_USEC * floor))
                for p, bar in ((16, BAR_P16), (1, BAR_P1)):
                    ratio = med(v.name, keymode, p, "rps") / med("INCR", keymode, p, "rps")
                    cells.append(verdict(ratio, ratio >= bar))
                if v.twin in present:
                    ratio = med(v.name, keymode, 16, "rps") / med(v.twin, keymode, 16, "rps")
                    cells.append(verdict(ratio, ratio >= BAR_LUA))
                else:
                    cells.append("n/a")
            elif v.script:
                # No bar for the twins themselves: their ratios to INCR, and in the last
                # column the ceiling of the Lua bar (INCR's own throughput ÷ this twin's).
                cells.append(f"{us / usec('INCR', keymode):.2f}")
                for p in (16, 1):
                    ratio = med(v.name, keymode, p, "rps") / med("INCR", keymode, p, "rps")
                    cells.append(f"{ratio:.2f}")
                ceiling = med("INCR", keymode, 16, "rps") / med(v.name, keymode, 16, "rps")
                cells.append(f"(INCR: {ceiling:.2f})")
            else:
                cells += ["—"] * 4
            if keymode == "random" and v.name in memory:
                per_key, usage = memory[v.name]
                cells.append(f"{per_key:.1f} {'pass' if per_key <= BAR_BYTES_KEY else 'FAIL'}"
                             if v.mem_bar else f"{per_key:.1f}")
                cells.append(str(usage))
            else:
                cells += ["—", "—"]
            rows.append(cells)
    # Per-entry cost of a sliding log.
    blank = ["—"] * (len(head) - 4)
    slide = entry_bytes.get("RL.SLIDE")
    rows.append(["RL.SLIDE +1 log entry", "1 key"] + blank +
                [f"{slide:.1f} {'pass' if slide <= BAR_BYTES_ENTRY else 'FAIL'}"
                 if slide is not None else "n/a", "—"])
    zset = entry_bytes.get("zset")
    rows.append(["Lua sliding log +1 entry", "1 key"] + blank +
                [f"{zset:.1f}" if zset is not None else "n/a", "—"])
    lines = ["| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
    lines += ["| " + " | ".join(row) + " |" for row in rows]
    return "\n".join(lines)


def cpu_model():
    try:
        with open("/proc/cpuinfo") as f:
            for line in f:
                if line.startswith("model name"):
                    return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or "unknown"


def git_revision():
    """The commit of the repository (or worktree) the module was built in."""
    try:
        rev = subprocess.run(["git", "-C", os.path.dirname(MODULE) or ".", "describe",
                              "--always", "--dirty"],
                             capture_output=True, text=True, check=True).stdout.strip()
        return rev or "unknown"
    except (OSError, subprocess.CalledProcessError):
        return "unknown"


# ---------------------------------------------------------------------------------------------
# Side by side with redis-cell (issue 13): our CL.THROTTLE and redis-cell's, each on a server of
# its own (the same redis-server binary and arguments, only the module differs: both register
# CL.THROTTLE), alternated round by round; first standalone, then with a replica attached to
# each master.

CELL_MODULE = os.environ.get("CELL_MODULE", "")
CELL_SKIPPED = os.environ.get("CELL_SKIPPED", "")  # why run.sh has no redis-cell, if it has none
BENCH_ONLY = os.environ.get("BENCH_ONLY", "")  # "cell": only this comparison
SERVER_CPU = shlex.split(os.environ.get("SERVER_CPU", ""))
WORK = os.environ.get("BENCH_WORK", "")
DIVERGENCE_KEYS = env_int("BENCH_DIVERGENCE_KEYS", 1000)
DIVERGENCE_CALLS = 10  # per key, burst 5: 5 admitted then 5 limited
CELL_SIDES = ("ours", "redis-cell")
CELL_SETUPS = ("standalone", "replica")
CELL_BEGIN = "<!-- redis-cell comparison: begin -->"
CELL_END = "<!-- redis-cell comparison: end -->"


def replication_free_memory(r):
    """used_memory without the replication buffers (backlog and replica output), which a
    replica keeps filling and trimming; settled like settled_used_memory, but slower, as the
    backlog is trimmed once a second."""
    def now():
        m = r.info("memory")
        return (int(m["used_memory"]) - int(m.get("mem_replication_backlog", 0))
                - int(m.get("mem_clients_slaves", 0)))
    last, same = now(), 0
    for _ in range(40):
        time.sleep(0.25)
        value = now()
        same = same + 1 if value == last else 0
        if same >= 4:  # unchanged for a second
            break
        last = value
    return last


def cell_memory(r, replica):
    """Bytes per key of CL.THROTTLE on the master (and its replica): MEM_KEYS keys, each made
    by one admitted call with an hour-long period, as memory_per_key does."""
    v = BY_NAME["CL.THROTTLE"]
    r.call("FLUSHALL", "SYNC")
    r.wait_replicas()
    base = replication_free_memory(r)
    rbase = replication_free_memory(replica) if replica else None
    load([v.mem_command(mem_key(i)) for i in range(MEM_KEYS)], v.admitted, via=r)
    r.wait_replicas()
    per_key = (replication_free_memory(r) - base) / MEM_KEYS
    replica_per_key = None
    if replica:
        if replica.call("DBSIZE") != MEM_KEYS:
            raise RuntimeError(f"replica: {replica.call('DBSIZE')} keys, not {MEM_KEYS}")
        replica_per_key = (replication_free_memory(replica) - rbase) / MEM_KEYS
    if r.call("DBSIZE") != MEM_KEYS:
        raise RuntimeError(f"{r.call('DBSIZE')} keys after loading {MEM_KEYS}")
    usage = r.call("MEMORY", "USAGE", mem_key(MEM_KEYS // 2), "SAMPLES", "0")
    r.call("FLUSHALL", "SYNC")
    r.wait_replicas()
    return per_key, replica_per_key, usage


def replica_divergence(r, replica):
    """The same DIVERGENCE_CALLS calls on each of DIVERGENCE_KEYS keys (burst 5, 1 per minute:
    5 admitted, 5 limited), then every key's value (DUMP) and absolute expiry (PEXPIRETIME)
    compared between master and replica once the replica has caught up."""
    r.call("FLUSHALL", "SYNC")
    r.wait_replicas()
    keys = [f"div:{i:06d}" for i in range(DIVERGENCE_KEYS)]
    calls = [["CL.THROTTLE", k, "4", "1", "60"] for _ in range(DIVERGENCE_CALLS) for k in keys]
    admitted = sum(1 for x in load(calls, via=r) if cell_admitted(x))
    r.wait_replicas()
    dumps = [c.pipeline([["DUMP", k] for k in keys], raw=True) for c in (r, replica)]
    expiries = [c.pipeline([["PEXPIRETIME", k] for k in keys]) for c in (r, replica)]
    missing = sum(1 for a, b in zip(*dumps) if a is not None and b is None)
    values = sum(1 for a, b in zip(*dumps) if a != b)
    gaps = [abs(a - b) for a, b in zip(*expiries) if a != b]
    r.call("FLUSHALL", "SYNC")
    r.wait_replicas()
    return {"admitted": admitted, "calls": len(calls), "keys": len(keys), "missing": missing,
            "values": values, "expiries": len(gaps), "max_gap": max(gaps, default=0)}


def cell_comparison():
    """Returns (samples, memory, divergence, check): samples[(setup, side, name, keymode, P)]
    are the benchmark() samples; memory[(setup, side)] = (bytes/key master, replica, MEMORY
    USAGE); divergence[side] from replica_divergence."""
    import servers

    modules = {"ours": MODULE, "redis-cell": CELL_MODULE}
    variants = (BY_NAME["INCR"], BY_NAME["CL.THROTTLE"])
    samples, memory, divergence = {}, {}, {}
    workdir = WORK or os.path.join(BENCH_DIR, "tmp")
    with servers.Servers() as pool:
        masters, conns, replicas = {}, {}, {}
        for side in CELL_SIDES:
            tag = side.replace("redis-", "")
            masters[side] = pool.start(servers.Server(f"cell-{tag}-master", workdir,
                                                      [modules[side]], SERVER_CPU))
            conns[side] = masters[side].connect()
            reply = conns[side].call("CL.THROTTLE", "thr:check", "99", "10", "60")
            if not (cell_admitted(reply) and len(reply) == 5):
                raise RuntimeError(f"{side} CL.THROTTLE: unexpected reply {reply!r}")
        try:
            for setup in CELL_SETUPS:
                if setup == "replica":
                    # Replicas run on the client's CPU, so that the master's stays its own.
                    for side in CELL_SIDES:
                        tag = side.replace("redis-", "")
                        rep = pool.start(servers.Server(f"cell-{tag}-replica", workdir,
                                                        [modules[side]], CLIENT_CPU))
                        rep.replicate(masters[side])
                        replicas[side] = rep.connect()
                        conns[side].replicas = 1
                log(f"redis-cell comparison, {setup}: warm-up …")
                for side in CELL_SIDES:
                    for v in variants:
                        for keymode in KEYMODES:
                            benchmark(conns[side], v, keymode, 16, 20_000)
                started = time.monotonic()
                for rep in range(1, REPS + 1):
                    # A B, then B A: drift of the machine falls on both alike.
                    order = CELL_SIDES if rep % 2 else CELL_SIDES[::-1]
                    for keymode in KEYMODES:
                        for pipeline in PIPELINES:
                            for side in order:
                                for v in variants:
                                    s = benchmark(conns[side], v, keymode, pipeline,
                                                  N_BY_PIPELINE[pipeline])
                                    samples.setdefault((setup, side, v.name, keymode, pipeline),
                                                       []).append(s)
                    log(f"redis-cell comparison, {setup}: round {rep}/{REPS} "
                        f"({time.monotonic() - started:.1f}s)")
                for side in CELL_SIDES:
                    log(f"redis-cell comparison, {setup}: memory per key, {side} …")
                    memory[(setup, side)] = cell_memory(conns[side], replicas.get(side))
                if setup == "replica":
                    for side in CELL_SIDES:
                        divergence[side] = replica_divergence(conns[side], replicas[side])
        finally:
            for c in list(conns.values()) + list(replicas.values()):
                c.close()
    return samples, memory, divergence


def cell_section(redis_version):
    """The markdown section of RESULTS.md comparing with redis-cell (between CELL_BEGIN and
    CELL_END, so that BENCH_ONLY=cell can replace it alone)."""
    if not CELL_MODULE:
        return (f"{CELL_BEGIN}\n## Side by side with redis-cell\n\nNot measured: "
                f"{CELL_SKIPPED or 'no redis-cell module (CELL_MODULE)'}.\n{CELL_END}\n")
    started = time.monotonic()
    samples, memory, divergence = cell_comparison()

    def med(setup, side, name, keymode, p, attr):
        return median([getattr(s, attr) for s in samples[(setup, side, name, keymode, p)]])

    head = ["setup", "module", "keys", "ops/s -P1", "ops/s -P16", "p50/p99 ms -P16",
            "server µs/call -P16", "INCR µs/call -P16", "µs ÷ INCR", "ops ÷ INCR -P16",
            "ops ÷ INCR -P1", "bytes/key", "replica bytes/key", "MEMORY USAGE"]
    rows = []
    for setup in CELL_SETUPS:
        for keymode in KEYMODES:
            for side in CELL_SIDES:
                def m(name, p, attr, side=side):
                    return med(setup, side, name, keymode, p, attr)
                us, incr_us = m("CL.THROTTLE", 16, "usec"), m("INCR", 16, "usec")
                cells = [setup, side, keymode, fmt_int(m("CL.THROTTLE", 1, "rps")),
                         fmt_int(m("CL.THROTTLE", 16, "rps")),
                         f"{m('CL.THROTTLE', 16, 'p50'):.3f} / {m('CL.THROTTLE', 16, 'p99'):.3f}",
                         f"{us:.3f}", f"{incr_us:.3f}", f"{us / incr_us:.2f}",
                         f"{m('CL.THROTTLE', 16, 'rps') / m('INCR', 16, 'rps'):.2f}",
                         f"{m('CL.THROTTLE', 1, 'rps') / m('INCR', 1, 'rps'):.2f}"]
                if keymode == "random":
                    per_key, replica_per_key, usage = memory[(setup, side)]
                    cells += [f"{per_key:.1f}",
                              "—" if replica_per_key is None else f"{replica_per_key:.1f}",
                              str(usage)]
                else:
                    cells += ["—", "—", "—"]
                rows.append(cells)
    table = ["| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
    table += ["| " + " | ".join(r) + " |" for r in rows]

    ratio_head = ["setup", "keys", "server µs/call", "ops/s -P16", "ops/s -P1",
                  "µs ÷ INCR", "bytes/key"]
    ratios = ["| " + " | ".join(ratio_head) + " |", "|" + "---|" * len(ratio_head)]
    for setup in CELL_SETUPS:
        for keymode in KEYMODES:
            def q(name, p, attr):
                return (med(setup, "ours", name, keymode, p, attr)
                        / med(setup, "redis-cell", name, keymode, p, attr))
            rel_incr = q("CL.THROTTLE", 16, "usec") / q("INCR", 16, "usec")
            mem = (f"{memory[(setup, 'ours')][0] / memory[(setup, 'redis-cell')][0]:.2f}"
                   if keymode == "random" else "—")
            ratios.append(f"| {setup} | {keymode} | {q('CL.THROTTLE', 16, 'usec'):.2f} | "
                          f"{q('CL.THROTTLE', 16, 'rps'):.2f} | {q('CL.THROTTLE', 1, 'rps'):.2f} | "
                          f"{rel_incr:.2f} | {mem} |")

    div = []
    for side in CELL_SIDES:
        d = divergence[side]
        div.append(f"- {side}: {d['admitted']:,} of {d['calls']:,} calls admitted on the master; "
                   f"replica values differing from the master's: {d['values']:,} of "
                   f"{d['keys']:,} keys ({d['missing']:,} missing); absolute expiries "
                   f"differing: {d['expiries']:,}"
                   + (f" (by up to {d['max_gap']:,} ms)" if d['expiries'] else ""))

    raw = ["<details><summary>Raw samples (ops/s · p50 · p99 ms · server µs/call)</summary>",
           "", "| setup | module | command | keys | -P | rounds |", "|---|---|---|---|---|---|"]
    for (setup, side, name, keymode, p), runs in samples.items():
        rounds = "; ".join(f"{s.rps:,.0f} · {s.p50:.3f} · {s.p99:.3f} · {s.usec:.3f}"
                           for s in runs)
        raw.append(f"| {setup} | {side} | {name} | {keymode} | {p} | {rounds} |")
    raw += ["", "</details>"]

    date = datetime.datetime.now(datetime.timezone.utc)
    cpu = "masters on CPU 0; replicas and redis-benchmark on CPU 1" if SERVER_CPU else "none"
    return f"""{CELL_BEGIN}
## Side by side with redis-cell

Generated by `make bench` (or `make bench-cell`) on {date:%Y-%m-%d %H:%M UTC} in
{time.monotonic() - started:.0f} s.

- Modules: ours `{MODULE}` (commit {git_revision()}); redis-cell `{CELL_MODULE}`
  (brandur/redis-cell 4d42338, `cargo build --release`).
- Each on a redis-server {redis_version} of its own, started with the same arguments
  (`save ""`, `appendonly no`, TCP 127.0.0.1; only `--loadmodule` differs: both modules
  register `CL.THROTTLE`). Pinning: {cpu}.
- In each round both servers run `INCR` and `CL.THROTTLE k 99 10 60` with random keys
  (`-r {KEYSPACE:,}`) and one hot key at -P 1 and -P 16 ({CLIENTS} clients,
  {N_BY_PIPELINE[1]:,} / {N_BY_PIPELINE[16]:,} requests), the servers' order swapped every
  round; {REPS} rounds, medians.
- "replica": the same with a replica (a plain redis-server with the same module) attached to
  each master; after every run the master `WAIT`s for it, so that one run's replication
  work does not fall into the next.

{chr(10).join(table)}

Ours ÷ redis-cell (below 1: ours takes less time per call, uses less memory; above 1 for
ops/s: ours is faster):

{chr(10).join(ratios)}

Replica divergence: {DIVERGENCE_CALLS} calls `CL.THROTTLE k 4 1 60` on each of
{DIVERGENCE_KEYS:,} keys (pipelined), then, once the replica has caught up (`WAIT`), every
key's `DUMP` and `PEXPIRETIME` on master and replica compared:

{chr(10).join(div)}

- `server µs/call -P16`: `usec / calls` from `INFO commandstats` of the master, as in the main
  table; `INCR µs/call -P16` is the same server's `INCR` in the same rounds, the floor the
  ratios use. With a replica the figure still counts the command alone, not the writes to
  the replica, which come after the command returns (they show in ops/s).
- `bytes/key`: `used_memory` delta over {MEM_KEYS:,} keys, each made by one admitted
  `CL.THROTTLE k 99 1 3600` (as the main table), less the replication buffers
  (`mem_replication_backlog` + `mem_clients_slaves`, which a replica keeps filling and
  trimming); `replica bytes/key` the same on the replica. redis-cell stores a string (the
  theoretical arrival time in ns) with `SET … PX`, ours a module value.
- Replication: redis-cell replicates every call verbatim (`RedisModule_ReplicateVerbatim`),
  limited ones included, and the replica evaluates it again with its own clock; ours
  replicates admitted calls only, as the state they left (`RL.RESTORE key <payload>`),
  or verbatim while nothing consumes propagation (no replica, no backlog, no AOF).

{chr(10).join(raw)}
{CELL_END}
"""


def splice_cell_section(section):
    """Replaces the redis-cell section of RESULTS (or appends it), leaving the rest alone."""
    report.splice_section(RESULTS, CELL_BEGIN, CELL_END, section, "# Benchmark results")


# ---------------------------------------------------------------------------------------------


def main():
    started = time.monotonic()
    r = Redis()
    server = r.info("server")
    allocator = r.info("memory").get("mem_allocator", "?")

    if BENCH_ONLY == "cell":  # the redis-cell comparison alone, into its section of RESULTS
        section = cell_section(server.get("redis_version", "?"))
        print(section)
        splice_cell_section(section)
        log(f"redis-cell section written to {RESULTS} ({time.monotonic() - started:.0f} s)")
        r.close()
        return
    if BENCH_ONLY:
        raise SystemExit(f"BENCH_ONLY={BENCH_ONLY!r}: only 'cell' is known")

    # Which commands exist (RL.SLIDE may not yet), and the Lua twins' SHA1s.
    present = set()
    for v in VARIANTS:
        if v.script:
            with open(os.path.join(BENCH_DIR, "lua", v.script), "rb") as f:
                v.sha = r.call("SCRIPT", "LOAD", f.read())
            present.add(v.name)
        elif r.call("COMMAND", "INFO", v.stat) != [None]:
            present.add(v.name)
        else:
            log(f"{v.name}: not in this build, reported as n/a")
    variants = [v for v in VARIANTS if v.name in present]

    # Each variant once, so a broken script or command fails before anything is timed.
    for v in variants:
        reply = r.call(*v.command(f"{v.prefix}:check"))
        if v.name != "INCR" and not (isinstance(reply, list) and len(reply) == 5
                                     and all(isinstance(x, int) for x in reply)):
            raise RuntimeError(f"{v.name}: unexpected reply {reply!r}")
        if not v.admitted(reply):
            raise RuntimeError(f"{v.name}: first call not admitted: {reply!r}")

    samples = run_throughput(r, variants)

    log("memory per key …")
    memory = {v.name: memory_per_key(r, v) for v in variants}
    entry_bytes = {}
    if "RL.SLIDE" in present:
        log("memory per RL.SLIDE log entry …")
        limit = str(max(SLIDE_ENTRIES, 1))
        entry_bytes["RL.SLIDE"] = memory_per_entry(
            r, lambda ms: ["RL.SLIDE", "slide:log", limit, "1h", "AT", str(ms)], rl_admitted)
    log("memory per sorted-set log entry …")
    entry_bytes["zset"] = memory_per_entry(
        r, lambda ms: ["ZADD", "zset:log", str(ms), f"{ms // 1000}.{ms % 1000 * 1000}:1"],
        lambda reply: reply == 1)

    log(f"one hot key, {HOT_CLIENTS} concurrent clients …")
    hot = [hot_key_check(r, v) for v in variants if v.name in HOT_CHECKS]
    hot += [f"{name}: n/a" for name in HOT_CHECKS if name not in present]

    log("memory per key of the other forms …")
    forms_table = forms_memory_table(r)
    table = build_table(samples, memory, entry_bytes, present) + "\n\n" + forms_table
    hot_text = (f"One hot key, {HOT_CLIENTS} concurrent clients × {HOT_PER_CLIENT} requests, "
                f"limit {HOT_LIMIT:,} (exact admission count, no error):\n"
                + "".join(f"- {line}\n" for line in hot))
    print(table + "\n\n" + hot_text)
    log("side by side with redis-cell …")
    cell_text = cell_section(server.get("redis_version", "?"))
    print(cell_text)

    pinning = "server on CPU 0, redis-benchmark on CPU 1" if CLIENT_CPU else "none"
    date = datetime.datetime.now(datetime.timezone.utc)
    nproc = os.environ.get("MACHINE_NPROC", os.cpu_count())
    header = f"""# Benchmark results

Generated by `make bench` (`bench/run.sh`) on {date:%Y-%m-%d %H:%M UTC}
in {time.monotonic() - started:.0f} s.

- Machine: `nproc` {nproc}, {cpu_model()}, Linux {platform.release()}
- Redis {server.get('redis_version', '?')} ({allocator}), `save ""`, `appendonly no`, TCP 127.0.0.1
- Module: `{MODULE}` (built from commit {git_revision()})
- Pinning: {pinning}
- redis-benchmark: {CLIENTS} clients; -P 1 runs of {N_BY_PIPELINE[1]:,} requests, -P 16 runs of
  {N_BY_PIPELINE[16]:,}; random keys `-r {KEYSPACE:,}` or one hot key; {REPS} rounds, variants
  alternated within each round; every figure is the median of the rounds.
"""
    notes = f"""
- Parameters: `RL.TOKEN k 100 10 1m`, `RL.PERIOD k 100 1m`, `RL.SLIDE k 100 1m`,
  `RL.LEAKY k 100 10 1m`, `CL.THROTTLE k 99 10 60`; the Lua twins (`bench/lua/`) get the same
  parameters through `EVALSHA`. Every run starts from an empty database (`FLUSHALL`). With
  random keys every call is admitted (the write path: store, expire, replicate) and keys
  outlive the run, so they are created and updated in the same proportion as INCR's; the hot
  key soon runs out and is then limited (the read-only path). INCR writes in both cases.
- `server µs/call -P16`: `usec / calls` of the command in `INFO commandstats` (`CONFIG
  RESETSTAT` before each run) in the -P 16 runs, the steadiest figure (at -P 1 the network
  stack runs between any two commands and every figure is higher and noisier; see the raw
  samples); for the Lua twins it is `EVALSHA`'s, script included.
- `bytes/key`: `used_memory` delta over {MEM_KEYS:,} keys each created by one admitted call with
  an hour-long period (TTL included; INCR = `INCR` + `PEXPIRE`), key names `mem:` + 12 digits;
  `MEMORY USAGE` (one key, `SAMPLES 0`) is Redis' own estimate, as a cross-check.
- `+1 log entry`: (`used_memory` of one key holding {SLIDE_ENTRIES:,} log entries − the same
  key holding one) ÷ {SLIDE_ENTRIES - 1:,}; the entries are spread evenly over the 1 h window
  ({max(1, HOUR_MS // SLIDE_ENTRIES)} ms apart, cost 1 each), RL.SLIDE filled with `AT`, the
  sorted set with `ZADD` of members shaped like `sliding_log.lua`'s.
- Lua rows: their ratios to INCR, without verdict; "(INCR: x)" is INCR's own -P 16
  throughput ÷ the twin's, the most a native command as cheap as INCR could reach against it.
- Bars (SPEC §5): server time ≤ {BAR_USEC} × INCR; throughput ≥ {BAR_P16} × INCR at -P 16 and
  ≥ {BAR_P1} × at -P 1; ≥ {BAR_LUA:g} × the Lua twin at -P 16; ≤ {BAR_BYTES_KEY} bytes per key
  for the five limiters above, ≤ {BAR_BYTES_FORM} for every other fixed-size form;
  ≤ {BAR_BYTES_ENTRY} bytes per extra RL.SLIDE log entry. "n/a": the command is not in this build.
"""
    raw = ["", "<details><summary>Raw samples (ops/s · p50 · p99 ms · server µs/call)</summary>",
           "", "| command | keys | -P | rounds |", "|---|---|---|---|"]
    for (name, keymode, p), runs in samples.items():
        rounds = "; ".join(f"{s.rps:,.0f} · {s.p50:.3f} · {s.p99:.3f} · {s.usec:.3f}"
                           for s in runs)
        raw.append(f"| {name} | {keymode} | {p} | {rounds} |")
    raw += ["", "</details>", ""]
    with open(RESULTS, "w") as f:
        f.write(header + "\n" + table + "\n\n" + hot_text + notes + "\n".join(raw) + "\n"
                + cell_text)
    log(f"written to {RESULTS} ({time.monotonic() - started:.0f} s)")
    r.close()


if __name__ == "__main__":
    # run.sh stops us with SIGTERM: exit through the exception path, so that subprocess.run
    # kills the redis-benchmark under way.
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(143))
    main()
