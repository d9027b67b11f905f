#!/usr/bin/env python3
"""The measurements of `make bench-instr`: instructions per call under callgrind, run by
bench/instr.sh. Python 3 standard library only.

A master redis-server runs under `valgrind --tool=callgrind --dump-before=lastsaveCommand`:
every LASTSAVE this client sends makes callgrind write the costs since the previous dump and
start again from zero, so a measurement is: prepare (not counted), LASTSAVE, CALLS calls
pipelined in lockstep batches of PIPELINE (send PIPELINE commands, read their replies),
LASTSAVE; the second dump's total Ir ÷ CALLS is the figure (the whole server: reading and
parsing the requests, the command, the replies, the event loop and, with a replica, the
replication stream; the two LASTSAVE halves it also holds are a few thousand Ir in all, well
under 1 Ir per call at 20,000 calls). Keys are fixed (`k:000000` …), arguments fixed, the
batches the same every time, and the master runs with `hz 1` so that its timer (serverCron)
adds almost nothing: repetitions agree to within 0.5 %; each measurement is taken REPS times,
the median reported.

Key states: "existing" (every key made by one admitted call beforehand; the measured call is
admitted again: the write path on a warm key), "new" (empty database: every call creates its
key) and "limited" (a limit of 1, spent by the call beforehand: the refused, read-only path).
Servers: ours (our module) and redis-cell (its module), each first standalone, then with a
replica attached (a plain redis-server with the same module, not under valgrind).

Then the feature rows (bench/features.py: RL.ALL over 2 and 4 keys, BAN and WAIT on admitted
calls, an RL.ACQUIRE + RL.RELEASE pair with 100 leases held), on a master of their own,
standalone then with a replica, written between FEATURES_BEGIN and FEATURES_END;
INSTR_ONLY=features runs only those and replaces only that section of INSTR_OUT.

Environment (set by instr.sh): MODULE, CELL_MODULE (empty: no redis-cell rows), INSTR_OUT,
INSTR_WORK (scratch directory), INSTR_ONLY ("features" or empty). Tuning: INSTR_CALLS
(20000), INSTR_PIPELINE (16), INSTR_REPS (3), INSTR_KEEP (a directory to keep the callgrind dumps in; default: deleted).
"""

import datetime
import os
import platform
import re
import shutil
import signal
import statistics
import subprocess
import sys
import time

import features
import report
import servers
from resp import ReplyError


def env_int(name, default):
    value = os.environ.get(name, "")
    return int(value) if value else default


BENCH_DIR = os.path.dirname(os.path.abspath(__file__))
MODULE = os.environ.get("MODULE", "")
CELL_MODULE = os.environ.get("CELL_MODULE", "")
OUT = os.environ.get("INSTR_OUT", os.path.join(BENCH_DIR, "INSTR.md"))
WORK = os.environ.get("INSTR_WORK", "") or os.path.join(BENCH_DIR, "tmp")
KEEP = os.environ.get("INSTR_KEEP", "")
CALLS = env_int("INSTR_CALLS", 20_000)
PIPELINE = env_int("INSTR_PIPELINE", 16)
REPS = env_int("INSTR_REPS", 3)
ONLY = os.environ.get("INSTR_ONLY", "")
FEATURES_BEGIN = "<!-- features: begin -->"
FEATURES_END = "<!-- features: end -->"

STATES = ("existing", "new", "limited")
SETUPS = ("standalone", "replica")

# (row name, the server it runs on, the admitted command, the command with a limit of 1 for
# "limited" or None). Hour-long periods: no key expires while it is measured.
COMMANDS = [
    ("PING", "ours", ["PING"], None),
    ("INCR", "ours", ["INCR", "{key}"], None),
    ("RL.TOKEN", "ours", ["RL.TOKEN", "{key}", "100", "1", "1h"],
     ["RL.TOKEN", "{key}", "1", "1", "1h"]),
    ("RL.PERIOD", "ours", ["RL.PERIOD", "{key}", "100", "1h"], ["RL.PERIOD", "{key}", "1", "1h"]),
    ("RL.SLIDE", "ours", ["RL.SLIDE", "{key}", "100", "1h"], ["RL.SLIDE", "{key}", "1", "1h"]),
    ("RL.LEAKY", "ours", ["RL.LEAKY", "{key}", "100", "1", "1h"],
     ["RL.LEAKY", "{key}", "1", "1", "1h"]),
    ("CL.THROTTLE", "ours", ["CL.THROTTLE", "{key}", "99", "1", "3600"],
     ["CL.THROTTLE", "{key}", "0", "1", "3600"]),
    # Policies: the same limits held by the server (POLICY_SETUP), judged by name.
    ("RL.HIT token", "ours", ["RL.HIT", "tok", "{key}"], ["RL.HIT", "tok1", "{key}"]),
    ("RL.HIT period", "ours", ["RL.HIT", "per", "{key}"], ["RL.HIT", "per1", "{key}"]),
    # The propagation floor: plain Redis commands of 3, 4 and 5 arguments, which Redis
    # propagates verbatim (the cheapest form it has), measured on an existing key only.
    ("SET (3 args)", "ours", ["SET", "{key}", "v"], None),
    ("HSET (4 args)", "ours", ["HSET", "{key}", "f", "v"], None),
    ("MSET (5 args)", "ours", ["MSET", "{key}", "1", "x{key}", "2"], None),
    ("PING", "redis-cell", ["PING"], None),
    ("INCR", "redis-cell", ["INCR", "{key}"], None),
    ("CL.THROTTLE", "redis-cell", ["CL.THROTTLE", "{key}", "99", "1", "3600"],
     ["CL.THROTTLE", "{key}", "0", "1", "3600"]),
]


# The policies the RL.HIT rows judge by: RL.TOKEN k 100 1 1h and RL.PERIOD k 100 1h, and their
# limit-of-1 twins (policies survive FLUSHALL, so they are defined once per server).
POLICY_SETUP = [
    ["RL.POLICY", "SET", "tok", "TOKEN", "100", "1", "1h"],
    ["RL.POLICY", "SET", "tok1", "TOKEN", "1", "1", "1h"],
    ["RL.POLICY", "SET", "per", "PERIOD", "100", "1h"],
    ["RL.POLICY", "SET", "per1", "PERIOD", "1", "1h"],
]
# Rows measured on an existing key only (the propagation floor).
FLOOR_ROWS = {"INCR": 2, "SET (3 args)": 3, "HSET (4 args)": 4, "MSET (5 args)": 5}
FLOOR_BEGIN = "<!-- floor: begin -->"
FLOOR_END = "<!-- floor: end -->"
TOP_BEGIN = "<!-- top: begin -->"
TOP_END = "<!-- top: end -->"
# Issue 30's before/after of the redesign (reduced runs, written by hand): kept like RL.TOP's.
ARCH_BEGIN = "<!-- arch: begin -->"
ARCH_END = "<!-- arch: end -->"
POLICIES_BEGIN = "<!-- policies: begin -->"
POLICIES_END = "<!-- policies: end -->"
# INSTR_ONLY=policies: the rows RL.HIT is compared with.
POLICY_ROWS = ("PING", "RL.TOKEN", "RL.PERIOD", "RL.HIT token", "RL.HIT period")


def log(msg):
    print(msg, file=sys.stderr, flush=True)


def key(i):
    return f"k:{i:06d}"


def expand(args, i):
    return [a.replace("{key}", key(i)) for a in args]


def check(name, replies, state):
    """Every reply as expected: no error; RL.* / CL.THROTTLE admitted, or limited for
    "limited"."""
    for reply in replies:
        if isinstance(reply, ReplyError):
            raise RuntimeError(f"{name} ({state}): {reply}")
        if name.startswith("RL.") or name == "CL.THROTTLE":
            ok = isinstance(reply, list) and len(reply) == 5
            admitted = ok and (reply[0] == 0 if name == "CL.THROTTLE" else reply[0] == 1)
            if not ok or admitted != (state != "limited"):
                raise RuntimeError(f"{name} ({state}): unexpected reply {reply!r}")


def call_inclusive(path):
    """Ir inside Redis' `call()` (inclusive) in a dump: the command's execution alone (its
    own work, its reply, its propagation), without reading, parsing and writing the request
    and its reply on the connection. 0 if the dump has no such function."""
    out = subprocess.run(["callgrind_annotate", "--inclusive=yes", "--threshold=100", path],
                         capture_output=True, text=True).stdout
    for line in out.splitlines():
        fields = line.split()
        if len(fields) >= 2 and re.search(r"(^|:)call$", fields[-2] if fields[-1].startswith("[")
                                          else fields[-1]):
            return int(fields[0].replace(",", ""))
    return 0


# Ir per call inside call(), by (setup, side, name, state): filled beside the totals.
CALL_RESULTS = {}


class Callgrind:
    """The master under callgrind, and reading its dumps."""

    def __init__(self, server):
        self.server = server
        self.parts = 0

    def dump_file(self, part):
        return os.path.join(self.server.dir, f"callgrind.out.{self.server.proc.pid}.{part}")

    def mark(self, conn):
        """LASTSAVE: callgrind dumps the costs since the previous dump; returns its total Ir."""
        conn.call("LASTSAVE")
        self.parts += 1
        path = self.dump_file(self.parts)
        total = None
        with open(path) as f:
            for line in f:
                if line.startswith("totals:") or (total is None and line.startswith("summary:")):
                    total = int(line.split()[1])
        if total is None:
            raise RuntimeError(f"no totals in {path}")
        self.last_call = call_inclusive(path)
        if KEEP:
            os.makedirs(KEEP, exist_ok=True)
            shutil.copy(path, KEEP)
        os.remove(path)
        return total


def measure(cg, conn, name, admitted, limited, state):
    """Ir per call of CALLS calls in state `state` (see the module's notes)."""
    command = limited if state == "limited" else admitted
    conn.call("FLUSHALL", "SYNC")
    if state in ("existing", "limited") and "{key}" in " ".join(command):
        check(name, conn.pipeline([expand(command, i) for i in range(CALLS)]), "existing")
    conn.wait_replicas()
    cg.mark(conn)
    encoded = [conn.encode(expand(command, i)) for i in range(CALLS)]
    replies = []
    for start in range(0, CALLS, PIPELINE):
        batch = encoded[start : start + PIPELINE]
        conn.sock.sendall(b"".join(batch))
        replies.extend(conn.read() for _ in batch)
    total = cg.mark(conn)
    cg.call_per_call = cg.last_call / CALLS
    check(name, replies, state)
    conn.wait_replicas()
    return total / CALLS


def each_setup(pool, master, conn, workdir, module):
    """Yields each setup in turn: "standalone", then — once a replica (a plain redis-server with
    the same module) is attached to `master` and `conn` waits for it — "replica"."""
    for setup in SETUPS:
        if setup == "replica":
            replica = pool.start(servers.Server("replica", workdir, [module]))
            replica.replicate(master, timeout=600)
            conn.replicas = 1
        yield setup


def start_master(pool, workdir, module):
    """The measured master: redis-server under callgrind, dumping before every LASTSAVE."""
    valgrind = ["valgrind", "--tool=callgrind", "--dump-before=lastsaveCommand",
                f"--callgrind-out-file={os.path.join(workdir, 'master')}/callgrind.out.%p"]
    return pool.start(servers.Server("master", workdir, [module], valgrind,
                                     ["--hz", "1", "--dynamic-hz", "no"], start_timeout=300))


def run_server(side, module, results):
    """Every row of `side`, standalone then with a replica; results[(setup, side, name,
    state)] = [Ir per call, one per repetition]."""
    rows = [c for c in COMMANDS if c[1] == side]
    workdir = os.path.join(WORK, side.replace("redis-", ""))
    with servers.Servers() as pool:
        master = start_master(pool, workdir, module)
        cg = Callgrind(master)
        conn = master.connect()
        if side == "ours":
            for command in POLICY_SETUP:
                conn.call(*command)
        try:
            for setup in each_setup(pool, master, conn, workdir, module):
                for rep in range(1, REPS + 1):
                    started = time.monotonic()
                    for name, _, admitted, limited in rows:
                        for state in STATES:
                            if state == "limited" and limited is None:
                                continue
                            if state == "new" and (name == "PING" or (
                                    name in FLOOR_ROWS and name != "INCR")):
                                continue
                            ir = measure(cg, conn, name, admitted, limited, state)
                            results.setdefault((setup, side, name, state), []).append(ir)
                            CALL_RESULTS.setdefault((setup, side, name, state), []).append(
                                cg.call_per_call)
                    log(f"{side}, {setup}: round {rep}/{REPS} "
                        f"({time.monotonic() - started:.0f} s)")
        finally:
            conn.close()


# Other servers of the matrix (INSTR_SERVERS="name=/path/to/server-binary,..."; instr.sh fills it
# from scripts/servers.sh): the rows below, existing keys, inside call(), one repetition each.
OTHER_ROWS = ("INCR", "RL.TOKEN", "RL.PERIOD", "RL.SLIDE", "RL.LEAKY", "CL.THROTTLE")
OTHER_BEGIN = "<!-- servers: begin -->"
OTHER_END = "<!-- servers: end -->"
# (server, setup, row) -> Ir inside call() per call.
OTHER_RESULTS = {}


def other_servers():
    spec = os.environ.get("INSTR_SERVERS", "")
    return [tuple(item.split("=", 1)) for item in spec.split(",") if "=" in item]


def run_other_servers(module):
    """The OTHER_ROWS on every server of INSTR_SERVERS, standalone then with a replica (the
    binary is put first in PATH as `redis-server`, which bench/servers.py starts)."""
    rows = [c for c in COMMANDS if c[1] == "ours" and c[0] in OTHER_ROWS]
    saved_path = os.environ.get("PATH", "")
    for name, binary in other_servers():
        bindir = os.path.join(WORK, f"bin-{name}")
        os.makedirs(bindir, exist_ok=True)
        link = os.path.join(bindir, "redis-server")
        if os.path.lexists(link):
            os.remove(link)
        os.symlink(os.path.abspath(binary), link)
        os.environ["PATH"] = bindir + os.pathsep + saved_path
        workdir = os.path.join(WORK, f"srv-{name}")
        try:
            with servers.Servers() as pool:
                master = start_master(pool, workdir, module)
                cg = Callgrind(master)
                conn = master.connect()
                # The module doubts it is alone for its first second (src/shell/server/propagation.rs):
                # measure after it has checked, as the repeated rounds above do.
                conn.call("RL.TOKEN", "warm", "1", "1", "1h")
                time.sleep(1.5)
                conn.call("RL.TOKEN", "warm", "1", "1", "1h")
                try:
                    for setup in each_setup(pool, master, conn, workdir, module):
                        for row, _, admitted, limited in rows:
                            measure(cg, conn, row, admitted, limited, "existing")
                            OTHER_RESULTS[(name, setup, row)] = cg.call_per_call
                        log(f"{name}, {setup}: done")
                finally:
                    conn.close()
        finally:
            os.environ["PATH"] = saved_path


def other_servers_section():
    if not OTHER_RESULTS:
        return ""
    names = [n for n, _ in other_servers()]
    head = ["command"]
    for n in ["Redis 7.0.15 (above)"] + names:
        head += [f"{n} standalone", f"{n} with a replica"]
    out = [OTHER_BEGIN, "## The same calls on the newer servers of the matrix", "",
           "Same run, Ir inside `call()`, existing keys; one repetition each on the newer servers "
           "(the repetitions above agree within 0.5 %). Each server's own `redis-server` binary "
           "(`scripts/servers.sh`), master under callgrind, a replica of the same server.", "",
           "| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
    for row in OTHER_ROWS:
        cells = [row]
        first = [call_median(setup, row) for setup in SETUPS]
        cells += ["—" if v is None else f"{v:,.0f}" for v in first]
        for n in names:
            for setup in SETUPS:
                v = OTHER_RESULTS.get((n, setup, row))
                cells.append("—" if v is None else f"{v:,.0f}")
        out.append("| " + " | ".join(cells) + " |")
    out += ["", OTHER_END, ""]
    return "\n".join(out)


def table(results, setup):
    head = ["command", "server", "existing key", "new key", "limited",
            "existing − PING", "new − PING", "limited − PING"]
    lines = ["| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
    for name, side, _, _ in COMMANDS:
        def med(state):
            runs = results.get((setup, side, name, state))
            return statistics.median(runs) if runs else None
        base = statistics.median(results[(setup, side, "PING", "existing")])
        cells = [name, side]
        for state in STATES:
            value = med(state)
            cells.append("—" if value is None else f"{value:,.0f}")
        for state in STATES:
            value = med(state)
            cells.append("—" if value is None or name == "PING" else f"{value - base:,.0f}")
        lines.append("| " + " | ".join(cells) + " |")
    return "\n".join(lines)


# The bars of issue 13 / SPEC §5 on call()'s figure for an existing key.
CALL_BARS = {"standalone": 6200, "replica": 12500}
# Issue 26's tighter bars with a replica attached (existing key, inside call()).
REPLICA_BARS_26 = {"RL.TOKEN": 9000, "RL.PERIOD": 9000, "RL.LEAKY": 9000, "CL.THROTTLE": 9000,
                   "RL.SLIDE": 10000}


def call_median(setup, name, state="existing", side="ours"):
    runs = CALL_RESULTS.get((setup, side, name, state))
    return statistics.median(runs) if runs else None


def call_table(setup):
    head = ["command", "server", "existing key", f"bar ≤ {CALL_BARS[setup]:,}"]
    if setup == "replica":
        head.append("issue 26 bar")
    head += ["new key", "limited"]
    lines = ["| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
    for name, side, _, _ in COMMANDS:
        existing = call_median(setup, name, side=side)
        cells = [name, side, "—" if existing is None else f"{existing:,.0f}"]
        plain = name in ("PING",) or name in FLOOR_ROWS
        if existing is None or plain or side != "ours":
            cells.append("—")
        else:
            cells.append("pass" if existing <= CALL_BARS[setup] else "FAIL")
        if setup == "replica":
            bar = REPLICA_BARS_26.get(name) if side == "ours" else None
            if bar is None or existing is None:
                cells.append("—")
            else:
                cells.append(f"≤ {bar:,}: " + ("pass" if existing <= bar else "FAIL"))
        for state in ("new", "limited"):
            value = call_median(setup, name, state, side)
            cells.append("—" if value is None else f"{value:,.0f}")
        lines.append("| " + " | ".join(cells) + " |")
    return "\n".join(lines)


def floor_section():
    """What propagation costs Redis itself, by argument count (plain commands it propagates
    verbatim), and the floor that puts under any exact form of our commands."""
    out = [FLOOR_BEGIN, "## With a replica: what propagation costs, and the floor under any form",
           "", "Same run, Ir inside `call()`, existing keys. Plain Redis commands propagate "
           "themselves verbatim — the client's own argument vector queued as is, no command "
           "lookup, no argument to build: the cheapest propagation a server has. What that "
           "costs grows with the argument count (every argument is fed to the replication "
           "stream as a `$len` header, its bytes and a CRLF):", "",
           "| command | arguments | standalone | with a replica | propagation |",
           "|---|---|---|---|---|"]
    delta = {}
    for name, argc in FLOOR_ROWS.items():
        alone, repl = call_median("standalone", name), call_median("replica", name)
        if alone is None or repl is None:
            continue
        delta[argc] = repl - alone
        out.append(f"| {name} | {argc} | {alone:,.0f} | {repl:,.0f} | +{repl - alone:,.0f} |")
    out += ["", "A module command is not propagated by Redis: it propagates itself, and an "
            "exact form must carry the master's instant or the state it left. Ours is "
            "`RL.RESTORE key <state>` through `RM_Replicate` (three arguments, but Redis looks "
            "the command up by name and builds the argument objects on every call). The floor "
            "below is the standalone call plus the verbatim propagation of as many arguments as "
            "the call has — what even a hypothetical exact form that Redis could propagate "
            "like a plain command, with no argument added, would cost:", "",
            "| command | arguments | standalone | with a replica (measured) | its propagation | "
            "floor: standalone + verbatim of its arguments | issue 26 bar |",
            "|---|---|---|---|---|---|---|"]
    for name, side, admitted, _ in COMMANDS:
        bar = REPLICA_BARS_26.get(name) if side == "ours" else None
        alone, repl = call_median("standalone", name), call_median("replica", name)
        argc = len(admitted)
        if bar is None or alone is None or repl is None or argc not in delta:
            continue
        floor = alone + delta[argc]
        out.append(f"| `{' '.join(admitted).replace('{key}', 'k')}` | {argc} | {alone:,.0f} | "
                   f"{repl:,.0f} | +{repl - alone:,.0f} | {floor:,.0f} | ≤ {bar:,} "
                   f"({'under the floor: unreachable' if floor > bar else 'over the floor: not excluded'}) |")
    out += ["", FLOOR_END, ""]
    return "\n".join(out)


# ---------------------------------------------------------------------------------------------
# Feature rows (bench/features.py): operations of one or more commands, on existing keys.


def measure_op(cg, conn, op):
    """Ir per operation of CALLS operations of `op` (its commands pipelined PIPELINE at a
    time, in lockstep, as measure() does), on keys op.prepare made."""
    conn.call("FLUSHALL", "SYNC")
    features.prepare_and_check(conn, op, CALLS)
    conn.wait_replicas()
    encoded = [conn.encode(c) for i in range(CALLS) for c in op.commands(i)]
    cg.mark(conn)
    replies = []
    for start in range(0, len(encoded), PIPELINE):
        batch = encoded[start : start + PIPELINE]
        conn.sock.sendall(b"".join(batch))
        replies.extend(conn.read() for _ in batch)
    total = cg.mark(conn)
    features.check_replies(op, CALLS, replies)
    conn.wait_replicas()
    return total / CALLS


def run_features(module, results):
    """results[(setup, name)] = [Ir per operation, one per repetition]."""
    workdir = os.path.join(WORK, "features")
    with servers.Servers() as pool:
        master = start_master(pool, workdir, module)
        cg = Callgrind(master)
        conn = master.connect()
        try:
            for setup in each_setup(pool, master, conn, workdir, module):
                for rep in range(1, REPS + 1):
                    started = time.monotonic()
                    for op in features.OPS:
                        ir = measure_op(cg, conn, op)
                        results.setdefault((setup, op.name), []).append(ir)
                    log(f"features, {setup}: round {rep}/{REPS} "
                        f"({time.monotonic() - started:.0f} s)")
        finally:
            conn.close()


def features_section(results, seconds):
    def med(setup, name):
        return statistics.median(results[(setup, name)])

    date = datetime.datetime.now(datetime.timezone.utc)
    out = [FEATURES_BEGIN, "## Features: RL.ALL, BAN, WAIT, leases", "",
           f"Generated by `make bench-features-instr` (or `make bench-instr`) on "
           f"{date:%Y-%m-%d %H:%M UTC} in {seconds:.0f} s; module commit {git_rev()}. "
           f"As above: {CALLS:,} operations per measurement, commands pipelined in lockstep "
           f"batches of {PIPELINE}, median of {REPS} repetitions, Ir of the whole master per "
           f"operation (an operation of two commands counts both); every key exists (made by "
           f"the same operation before the measured ones) and every call is admitted.", ""]
    for setup, title in (("standalone", "Standalone"), ("replica", "With a replica attached")):
        base = med(setup, "PING")
        out += [f"### {title}", "", "| operation | Ir per operation | − PING |", "|---|---|---|"]
        for op in features.OPS:
            value = med(setup, op.name)
            minus = "—" if op.name == "PING" else f"{value - base:,.0f}"
            out.append(f"| {op.name} | {value:,.0f} | {minus} |")
        out += ["", "| target | measured | reference | result | − PING: ratio |",
                "|---|---|---|---|---|"]
        for name, ref, kind, bar in features.TARGETS:
            refv = features.ref_value(ref, lambda r: med(setup, r))
            nref = 1 if isinstance(ref, str) else len(ref)
            shown, ok = features.verdict(kind, med(setup, name), refv, bar)
            q = (med(setup, name) - base) / (refv - nref * base)
            result = "(no target)" if ok is None else "met" if ok else "NOT met"
            out.append(f"| {name} vs {features.ref_name(ref)} | {shown} | {refv:,.0f} | "
                       f"{result} | {q:.2f} |")
        out.append("")
    out += ["Operations (keys `k:000000` …, RL.ALL keys `{u000000}:a` … one hash tag per "
            "operation):", ""]
    out += [f"- {op.name}: {op.note}" for op in features.OPS]
    out += ["",
            "- Periods are an hour (the brief's `1s` becomes `1h`): under callgrind the master "
            "runs tens of times slower, and a 1 s bucket would refill and its key expire "
            "between the preparation and the measured call.",
            "- `RL.TOKEN … WAIT 5s`: each key's bucket holds 99 of 100 tokens, so every call is "
            "admitted at once and answers at once (nothing blocks the pipeline).",
            "- BAN / WAIT targets: within the spread of repetitions (0.5 %) of the same call "
            "without the option (WAIT: not more). Any option is two more arguments that Redis "
            "reads, allocates, hands to the module and frees, and that are parsed and "
            "replicated: `COST 1` (the default, spelled out) is the same call with two more "
            "arguments, so BAN / WAIT vs `COST 1` is what the option itself costs. "
            "`− PING: ratio`: the ratio after subtracting PING's cost from each operation "
            "(what the commands themselves add; a sum of n rows loses n PINGs).",
            "- Lease pair: the key holds 100 leases with server-assigned IDs; each operation "
            "acquires lease `w<i>` (101 held) and releases it; the reference is two `INCR`s "
            "on an existing key, measured as one two-command operation.",
            "", "<details><summary>Every repetition (Ir per operation)</summary>", "",
            "| setup | operation | repetitions |", "|---|---|---|"]
    for (setup, name), runs in results.items():
        out.append(f"| {setup} | {name} | " + "; ".join(f"{x:,.1f}" for x in runs) + " |")
    out += ["", "</details>", FEATURES_END, ""]
    return "\n".join(out)


def splice_features(section):
    """Replaces the feature section of OUT (or appends it), leaving the rest alone."""
    report.splice_section(OUT, FEATURES_BEGIN, FEATURES_END, section,
                          "# Instructions per call (callgrind)")


def policies_section(seconds):
    """RL.HIT beside the direct commands it stands for: Ir inside call(), and the ratio (the
    bar of issue 24: at most 1.1 times the direct command)."""
    date = datetime.datetime.now(datetime.timezone.utc)
    out = [POLICIES_BEGIN, "## RL.HIT beside the direct command (`INSTR_ONLY=policies`)", "",
           f"Generated by `make bench-instr` (alone: `INSTR_ONLY=policies make bench-instr`) on "
           f"{date:%Y-%m-%d %H:%M UTC} "
           f"in {seconds:.0f} s (module commit {git_rev()}), as the tables above: Ir inside "
           f"`call()` per call, median of {REPS}. `RL.HIT tok k` judges by the policy "
           "`tok` = `TOKEN 100 1 1h` (`RL.HIT per k`: `PERIOD 100 1h`; \"limited\": the "
           "limit-of-1 twins). Bar: RL.HIT ≤ 1.1 × the direct command.", ""]
    pairs = [("RL.HIT token", "RL.TOKEN"), ("RL.HIT period", "RL.PERIOD")]
    for setup in SETUPS:
        out += [f"{setup.capitalize()}:", "",
                "| command | direct | existing key | ratio | new key | ratio | limited | ratio "
                "| bar ≤ 1.1 |", "|---|---|---|---|---|---|---|---|---|"]
        for hit, direct in pairs:
            cells = [hit, direct]
            worst = 0.0
            for state in STATES:
                h = CALL_RESULTS.get((setup, "ours", hit, state))
                d = CALL_RESULTS.get((setup, "ours", direct, state))
                if not h or not d:
                    cells += ["—", "—"]
                    continue
                hm, dm = statistics.median(h), statistics.median(d)
                worst = max(worst, hm / dm)
                cells += [f"{hm:,.0f} vs {dm:,.0f}", f"{hm / dm:.3f}"]
            cells.append("pass" if worst <= 1.1 else "FAIL")
            out.append("| " + " | ".join(cells) + " |")
        out.append("")
    out += [POLICIES_END, ""]
    return "\n".join(out)


def kept_section(begin, end):
    """The section between `begin` and `end` of the current OUT, markers included (empty if
    none): a full run rewrites OUT but keeps what it does not measure itself (RL.TOP's
    before/after comparison of two builds)."""
    try:
        with open(OUT) as f:
            text = f.read()
    except FileNotFoundError:
        return ""
    if begin not in text or end not in text:
        return ""
    return begin + text.split(begin, 1)[1].split(end, 1)[0] + end + "\n"


def git_rev():
    try:
        return subprocess.run(["git", "-C", os.path.dirname(MODULE), "describe", "--always",
                               "--dirty"], capture_output=True, text=True).stdout.strip() \
            or "unknown"
    except OSError:
        return "unknown"


def main():
    started = time.monotonic()
    if not MODULE:
        raise SystemExit("instr: MODULE not set")
    if ONLY == "features":
        fresults = {}
        run_features(MODULE, fresults)
        section = features_section(fresults, time.monotonic() - started)
        print(section)
        splice_features(section)
        log(f"feature section written to {OUT} ({time.monotonic() - started:.0f} s)")
        return
    if ONLY == "policies":
        COMMANDS[:] = [c for c in COMMANDS if c[1] == "ours" and c[0] in POLICY_ROWS]
        results = {}
        run_server("ours", MODULE, results)
        section = policies_section(time.monotonic() - started)
        print(section)
        report.splice_section(OUT, POLICIES_BEGIN, POLICIES_END, section,
                              "# Instructions per call (callgrind)")
        log(f"policy section written to {OUT} ({time.monotonic() - started:.0f} s)")
        return
    if ONLY:
        raise SystemExit(f"INSTR_ONLY={ONLY!r}: only 'features' and 'policies' are known")
    kept_top = kept_section(TOP_BEGIN, TOP_END) + kept_section(ARCH_BEGIN, ARCH_END)
    results = {}
    run_server("ours", MODULE, results)
    if CELL_MODULE:
        run_server("redis-cell", CELL_MODULE, results)
    else:
        log("instr: no redis-cell module, its rows are left out")
        COMMANDS[:] = [c for c in COMMANDS if c[1] != "redis-cell"]

    run_other_servers(MODULE)

    fstarted = time.monotonic()
    fresults = {}
    run_features(MODULE, fresults)
    ftext = features_section(fresults, time.monotonic() - fstarted)

    version = subprocess.run(["redis-server", "--version"], capture_output=True,
                             text=True).stdout.strip()
    vg = subprocess.run(["valgrind", "--version"], capture_output=True, text=True).stdout.strip()
    try:
        rev = subprocess.run(["git", "-C", os.path.dirname(MODULE), "describe", "--always",
                              "--dirty"], capture_output=True, text=True).stdout.strip()
    except OSError:
        rev = "unknown"
    date = datetime.datetime.now(datetime.timezone.utc)
    raw = ["<details><summary>Every repetition (Ir per call)</summary>", "",
           "| setup | server | command | key | repetitions |", "|---|---|---|---|---|"]
    for (setup, side, name, state), runs in results.items():
        raw.append(f"| {setup} | {side} | {name} | {state} | "
                   + "; ".join(f"{x:,.1f}" for x in runs) + " |")
    raw += ["", "</details>"]
    text = f"""# Instructions per call (callgrind)

Generated by `make bench-instr` (`bench/instr.sh`, `bench/instr.py`) on
{date:%Y-%m-%d %H:%M UTC} in {time.monotonic() - started:.0f} s.

- {version}; {vg}; Linux {platform.release()}
- Modules: ours `{MODULE}` (commit {rev or 'unknown'}); redis-cell `{CELL_MODULE or 'n/a'}`
  (brandur/redis-cell 4d42338)
- Instructions (callgrind `Ir`) of the whole master process per call: {CALLS:,} calls per
  measurement, pipelined in lockstep batches of {PIPELINE}, one connection, keys `k:000000` …
  `k:{CALLS - 1:06d}`; median of {REPS} repetitions (all of them below).
- "existing key": each key was made by one admitted call before; the measured call is
  admitted again (the write path on a warm key). "new key": empty database, every call
  creates its key. "limited": a limit of 1 spent by the call before; the measured call is
  refused (nothing written, and for ours nothing replicated).
- "− PING": minus `PING`'s own cost per call on the same server at the same batching (reading
  and parsing a request, dispatch, a reply, the event loop): what the command adds to the
  cheapest call. The left columns are as measured, nothing subtracted.
- Arguments: `INCR k`; `RL.TOKEN k 100 1 1h`, `RL.PERIOD k 100 1h`, `RL.SLIDE k 100 1h`,
  `RL.LEAKY k 100 1 1h`, `CL.THROTTLE k 99 1 3600`; "limited" the same with a limit of 1
  (`CL.THROTTLE k 0 1 3600`). Hour-long periods, so that no key expires while measured.
  The propagation floor: `SET k v`, `HSET k f v`, `MSET k 1 xk 2` (existing keys only).
- The master: `redis-server --save "" --appendonly no --hz 1 --dynamic-hz no --loadmodule …`
  under `valgrind --tool=callgrind --dump-before=lastsaveCommand`; a `LASTSAVE` from the
  client before and after the measured calls delimits them (callgrind dumps and zeroes its
  counters there; no `callgrind_control`, no timing). With a replica: a plain redis-server
  (same module, not under valgrind) attached with `REPLICAOF`; the master's figures then
  include feeding the replication stream. `WAIT` for the replica happens outside the
  measured calls.

## The command alone: Ir inside `call()`

What Redis' `call()` runs per call (inclusive): the command's own work, its reply and its
propagation — without reading and parsing the request off the socket and writing the reply
back, which cost every command the same (on this figure `INCR` is about 1,650). This is the
figure the bars of issue 13 / SPEC §5 are set on: an existing key, ≤ 6,200 standalone (6,000
until issue 30 raised it so that simpler code can land) and
≤ 12,500 with a replica attached (redis-cell: about 19,000 and 22,000); issue 26 asks ≤ 9,000 with
a replica (`RL.SLIDE` ≤ 10,000) — see "what propagation costs" below for why that is under the
floor of any exact form for the five-argument calls.

Standalone:

{call_table("standalone")}

With a replica attached:

{call_table("replica")}

## Standalone: the whole server

{table(results, "standalone")}

## With a replica attached: the whole server

{table(results, "replica")}

{chr(10).join(raw)}

{floor_section()}
{other_servers_section()}
{ftext}
{policies_section(time.monotonic() - started)}
{kept_top}"""
    print(text)
    with open(OUT, "w") as f:
        f.write(text)
    log(f"written to {OUT} ({time.monotonic() - started:.0f} s)")


if __name__ == "__main__":
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(143))
    main()
