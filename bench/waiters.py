#!/usr/bin/env python3
"""Wall-clock side of the feature measurements (`make bench-features`, or the end of `make
bench`), run by bench/run.sh; writes its section of RESULTS between FEATURES_BEGIN and
FEATURES_END, leaving the rest. Python 3 standard library only.

1. Server time per operation (INFO commandstats `usec`, summed over the operation's commands,
   after CONFIG RESETSTAT) of the operations in bench/features.py — RL.ALL over 2 and 4 keys,
   BAN and WAIT on admitted calls, the lease pair — beside RL.TOKEN and INCRs: OPS operations
   pipelined 16 commands at a time on one connection, on existing keys, REPS rounds with the
   operations alternated, medians. Noisy (a shared machine); bench/INSTR.md has the
   instruction counts, which are not.
2. Unrelated commands' latency while WAITERS clients wait (`RL.TOKEN wq:<j> 1 1 1s WAIT
   <timeout>`) on WAIT_KEYS keys, WAITERS / WAIT_KEYS connections per key: each key admits one
   waiter a second, which sends its call again at once, so the queues stay full and the
   module's timers keep firing. A probe (its own connection, this process) sends PING, SET,
   GET, INCR in turn, one every PROBE_INTERVAL_MS, and times each round trip; first for
   PROBE_SECONDS without waiters (the baseline), then for PROBE_SECONDS with every waiter
   queued, and again for PROBE_SECONDS once they have gone. The waiters are a separate
   process (asyncio, this file with --waiters).

A server of its own (module loaded, --maxclients above WAITERS, pinned like run.sh's).
Environment (from run.sh): MODULE, RESULTS, BENCH_WORK, SERVER_CPU, CLIENT_CPU. Tuning:
FEAT_OPS (20000), FEAT_REPS (5), WAITERS (10000), WAIT_KEYS (100), PROBE_SECONDS (10),
PROBE_INTERVAL_MS (1), WAIT_TIMEOUT (60s).
"""

import asyncio
import datetime
import os
import resource
import shlex
import signal
import statistics
import subprocess
import sys
import time

BENCH_DIR = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, BENCH_DIR)

import features  # noqa: E402
import report  # noqa: E402
import servers  # noqa: E402
from resp import Redis  # noqa: E402


def env_int(name, default):
    value = os.environ.get(name, "")
    return int(value) if value else default


MODULE = os.environ.get("MODULE", "")
RESULTS = os.environ.get("RESULTS", os.path.join(BENCH_DIR, "RESULTS.md"))
WORK = os.environ.get("BENCH_WORK", "") or os.path.join(BENCH_DIR, "tmp")
SERVER_CPU = shlex.split(os.environ.get("SERVER_CPU", ""))
CLIENT_CPU = shlex.split(os.environ.get("CLIENT_CPU", ""))
OPS = env_int("FEAT_OPS", 20_000)
REPS = env_int("FEAT_REPS", 5)
PIPELINE = 16
WAITERS = env_int("WAITERS", 10_000)
WAIT_KEYS = env_int("WAIT_KEYS", 100)
PROBE_SECONDS = env_int("PROBE_SECONDS", 10)
PROBE_INTERVAL_MS = env_int("PROBE_INTERVAL_MS", 1)
WAIT_TIMEOUT = os.environ.get("WAIT_TIMEOUT", "60s")
FEATURES_BEGIN = "<!-- features: begin -->"
FEATURES_END = "<!-- features: end -->"


def log(msg):
    print(msg, file=sys.stderr, flush=True)


def raise_nofile(want):
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    target = want if hard == resource.RLIM_INFINITY else min(want, hard)
    if soft < target:
        resource.setrlimit(resource.RLIMIT_NOFILE, (target, hard))
    return resource.getrlimit(resource.RLIMIT_NOFILE)[0]


# ---------------------------------------------------------------------------------------------
# 1. Server time per operation.


def server_time(conn, op):
    """µs of server time per operation (commandstats usec of its commands ÷ OPS)."""
    conn.call("FLUSHALL", "SYNC")
    features.prepare_and_check(conn, op, OPS)
    encoded = [conn.encode(c) for i in range(OPS) for c in op.commands(i)]
    conn.call("CONFIG", "RESETSTAT")
    replies = []
    for start in range(0, len(encoded), PIPELINE):
        batch = encoded[start : start + PIPELINE]
        conn.sock.sendall(b"".join(batch))
        replies.extend(conn.read() for _ in batch)
    features.check_replies(op, OPS, replies)
    usec = 0
    for stat in op.stats:
        calls, us, failed = conn.command_stats(stat)
        if failed:
            raise RuntimeError(f"{op.name}: {failed} failed calls")
        usec += us
    return usec / OPS


def run_server_time(conn):
    samples = {}
    for rep in range(1, REPS + 1):
        order = features.OPS if rep % 2 else features.OPS[::-1]
        for op in order:
            samples.setdefault(op.name, []).append(server_time(conn, op))
        log(f"features, server time: round {rep}/{REPS}")
    conn.call("FLUSHALL", "SYNC")
    return samples


# ---------------------------------------------------------------------------------------------
# 2. Latency with 10,000 waiters.


def waiter_command(j):
    return ["RL.TOKEN", f"wq:{j:03d}", "1", "1", "1s", "WAIT", WAIT_TIMEOUT]


async def waiters_main(port, n, keys):
    """--waiters: n connections, n // keys per key, each sending its WAIT call again whenever
    it is answered; "ready" on stdout once all are connected and sent, then until stdin
    closes; then closes everything and prints the counts."""
    stop = asyncio.Event()
    counts = {"replies": 0, "admitted": 0, "refused": 0, "errors": 0, "connected": 0}
    sem = asyncio.Semaphore(256)

    async def one(i):
        async with sem:
            reader, writer = await asyncio.open_connection("127.0.0.1", port)
        counts["connected"] += 1
        request = Redis.encode(waiter_command(i % keys))
        try:
            while not stop.is_set():
                writer.write(request)
                head = await reader.readline()
                if not head:
                    return
                if head[:1] == b"-":
                    counts["errors"] += 1
                    return
                fields = [await reader.readline() for _ in range(int(head[1:]))]
                counts["replies"] += 1
                counts["admitted" if fields[0] == b":1\r\n" else "refused"] += 1
        except (ConnectionError, asyncio.CancelledError):
            pass
        finally:
            writer.close()

    tasks = [asyncio.create_task(one(i)) for i in range(n)]
    loop = asyncio.get_running_loop()
    while counts["connected"] < n:
        if any(t.done() for t in tasks):
            failed = next(t for t in tasks if t.done())
            print(f"a waiter ended early: {failed.exception()!r}", flush=True)
            return
        await asyncio.sleep(0.05)
    print("ready", flush=True)
    await loop.run_in_executor(None, sys.stdin.read)  # until the parent closes our stdin
    stop.set()
    for t in tasks:
        t.cancel()
    await asyncio.gather(*tasks, return_exceptions=True)
    print(" ".join(f"{k}={v}" for k, v in counts.items()), flush=True)


def probe(port, seconds):
    """Round-trip times (µs) of PING, SET, GET, INCR in turn, one every PROBE_INTERVAL_MS."""
    c = Redis("127.0.0.1", port, timeout=30)
    cmds = [["PING"], ["SET", "probe:s", "v"], ["GET", "probe:s"], ["INCR", "probe:n"]]
    encoded = [c.encode(x) for x in cmds]
    times = []
    interval = PROBE_INTERVAL_MS / 1000
    end = time.monotonic() + seconds
    nxt = time.monotonic()
    i = 0
    try:
        while time.monotonic() < end:
            t0 = time.perf_counter_ns()
            c.sock.sendall(encoded[i % 4])
            c.read()
            times.append((time.perf_counter_ns() - t0) / 1000)
            i += 1
            nxt += interval
            delay = nxt - time.monotonic()
            if delay > 0:
                time.sleep(delay)
            else:
                nxt = time.monotonic()
    finally:
        c.close()
    return times


def pct(values, p):
    s = sorted(values)
    return s[min(len(s) - 1, int(round(p / 100 * (len(s) - 1))))]


def latency_stats(times):
    return {"n": len(times), "p50": pct(times, 50), "p99": pct(times, 99),
            "p999": pct(times, 99.9), "max": max(times),
            "over_1ms": sum(1 for t in times if t > 1000)}


def ratelimit_info(conn):
    info = conn.info("ratelimit")
    return {k: int(info.get(f"ratelimit_{k}", 0))
            for k in ("waiting", "wait_admitted", "wait_timeouts")}


def run_waiters(master, conn):
    result = {"baseline": None, "loaded": None, "load": [os.getloadavg()[0]]}
    log(f"waiters: baseline probe, {PROBE_SECONDS} s …")
    result["baseline"] = latency_stats(probe(master.port, PROBE_SECONDS))
    # Every key's bucket emptied first, so that each waiter queues.
    conn.pipeline([waiter_command(j)[:5] for j in range(WAIT_KEYS)])
    started = time.monotonic()
    proc = subprocess.Popen(CLIENT_CPU + [sys.executable, os.path.abspath(__file__), "--waiters",
                                          str(master.port), str(WAITERS), str(WAIT_KEYS)],
                            stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True,
                            preexec_fn=servers._die_with_parent)  # noqa: SLF001
    try:
        line = proc.stdout.readline().strip()
        if line != "ready":
            raise RuntimeError(f"waiters: {line!r}")
        # Until (almost) every waiter is queued: at most one per key is between replies.
        deadline = time.monotonic() + 60
        while ratelimit_info(conn)["waiting"] < WAITERS - WAIT_KEYS:
            if time.monotonic() > deadline:
                raise RuntimeError(f"waiters: only {ratelimit_info(conn)} after 60 s")
            time.sleep(0.1)
        result["connect_s"] = time.monotonic() - started
        clients = int(conn.info("clients")["connected_clients"])
        before = ratelimit_info(conn)
        log(f"waiters: {before['waiting']:,} waiting, {clients:,} clients; probe, "
            f"{PROBE_SECONDS} s …")
        times = probe(master.port, PROBE_SECONDS)
        result["load"].append(os.getloadavg()[0])
        after = ratelimit_info(conn)
        result["loaded"] = latency_stats(times)
        result["before"], result["after"], result["clients"] = before, after, clients
        t0 = time.monotonic()
        proc.stdin.close()
        result["counts"] = proc.stdout.readline().strip()
        proc.wait(timeout=60)
        while ratelimit_info(conn)["waiting"] > 0 and time.monotonic() - t0 < 30:
            time.sleep(0.05)
        result["teardown_s"] = time.monotonic() - t0
        result["left"] = ratelimit_info(conn)["waiting"]
        log(f"waiters: gone; probe again, {PROBE_SECONDS} s …")
        result["after_probe"] = latency_stats(probe(master.port, PROBE_SECONDS))
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    return result


# ---------------------------------------------------------------------------------------------


def section(samples, w, seconds, version):
    med = {name: statistics.median(v) for name, v in samples.items()}
    date = datetime.datetime.now(datetime.timezone.utc)
    out = [FEATURES_BEGIN, "## Features: RL.ALL, BAN, WAIT, leases (wall clock)", "",
           f"Generated by `make bench-features` (or `make bench`) on {date:%Y-%m-%d %H:%M UTC} "
           f"in {seconds:.0f} s; Redis {version}; module `{MODULE}` (commit "
           f"{git_rev()}). Instructions per call, the noise-free figures, are in "
           f"`bench/INSTR.md` (same operations).", "",
           f"Server time per operation (`INFO commandstats` µs summed over its commands, "
           f"{OPS:,} operations pipelined {PIPELINE} commands deep, existing keys, all "
           f"admitted; median of {REPS} rounds, operations alternated):", "",
           "| operation | server µs/op | ÷ RL.TOKEN | ÷ INCR ×2 |", "|---|---|---|---|"]
    for op in features.OPS:
        if op.name == "PING":
            continue
        v = med[op.name]
        out.append(f"| {op.name} | {v:.3f} | {v / med['RL.TOKEN']:.2f} | "
                   f"{v / med['INCR ×2']:.2f} |")
    out += ["", f"Unrelated commands (PING, SET, GET, INCR in turn, one every "
                f"{PROBE_INTERVAL_MS} ms, one connection, client-side round trip) for "
                f"{PROBE_SECONDS} s each, without and with {WAITERS:,} clients waiting on "
                f"{WAIT_KEYS} keys (`RL.TOKEN wq:<j> 1 1 1s WAIT {WAIT_TIMEOUT}`, "
                f"{WAITERS // WAIT_KEYS} connections per key; each key admits one waiter a "
                f"second, which queues again at once):", "",
            "| phase | probes | p50 µs | p99 µs | p99.9 µs | max µs | > 1 ms | p99 < 1 ms |",
            "|---|---|---|---|---|---|---|---|"]
    for phase, label in (("baseline", "no waiters (before)"), ("loaded", f"{WAITERS:,} waiting"),
                         ("after_probe", "no waiters (after)")):
        s = w[phase]
        out.append(f"| {label} | {s['n']:,} | {s['p50']:.0f} | {s['p99']:.0f} | "
                   f"{s['p999']:.0f} | {s['max']:.0f} | {s['over_1ms']} | "
                   f"{'met' if s['p99'] < 1000 else 'NOT met'} |")
    b, a = w["before"], w["after"]
    out += ["",
            f"- While probed: `waiting` {b['waiting']:,} → {a['waiting']:,} "
            f"(`INFO ratelimit`), {w['clients']:,} connected clients; "
            f"{a['wait_admitted'] - b['wait_admitted']:,} waiters admitted and "
            f"{a['wait_timeouts'] - b['wait_timeouts']} timed out during the probe.",
            f"- Connecting and queueing the waiters took {w['connect_s']:.1f} s; after they "
            f"disconnected, `waiting` was {w['left']} within {w['teardown_s']:.1f} s. "
            f"Waiter process: {w['counts']}.",
            "- Server pinned to CPU 0; the probe and the waiters' process (asyncio) share "
            "CPU 1. The round trip includes Python's own time (~20–40 µs). The machine's "
            f"1-minute load average was {w['load'][0]:.1f} before and {w['load'][1]:.1f} "
            "while probed (2 CPUs; other jobs share them): compare the rows of this run, "
            "not runs on different days.",
            FEATURES_END, ""]
    return "\n".join(out)


def git_rev():
    try:
        return subprocess.run(["git", "-C", os.path.dirname(MODULE), "describe", "--always",
                               "--dirty"], capture_output=True, text=True).stdout.strip() \
            or "unknown"
    except OSError:
        return "unknown"


def splice(text_section):
    """Replaces the feature section of RESULTS (or appends it), leaving the rest alone."""
    report.splice_section(RESULTS, FEATURES_BEGIN, FEATURES_END, text_section,
                          "# Benchmark results")


def main():
    started = time.monotonic()
    if not MODULE:
        raise SystemExit("waiters: MODULE not set")
    limit = raise_nofile(WAITERS + 1024)
    if limit < WAITERS + 64:
        raise SystemExit(f"waiters: open files limit {limit}, need {WAITERS + 64} "
                         f"(ulimit -n; WAITERS=… for fewer)")
    workdir = os.path.join(WORK, "features")
    with servers.Servers() as pool:
        master = pool.start(servers.Server("features", workdir, [MODULE], SERVER_CPU,
                                           ["--maxclients", str(WAITERS + 200)]))
        conn = master.connect()
        try:
            version = conn.info("server").get("redis_version", "?")
            log("features: server time per operation …")
            samples = run_server_time(conn)
            w = run_waiters(master, conn)
        finally:
            conn.close()
    text = section(samples, w, time.monotonic() - started, version)
    print(text)
    splice(text)
    log(f"feature section written to {RESULTS} ({time.monotonic() - started:.0f} s)")


if __name__ == "__main__":
    if len(sys.argv) == 5 and sys.argv[1] == "--waiters":
        raise_nofile(int(sys.argv[3]) + 1024)
        asyncio.run(waiters_main(int(sys.argv[2]), int(sys.argv[3]), int(sys.argv[4])))
    else:
        signal.signal(signal.SIGTERM, lambda *_: sys.exit(143))
        main()
