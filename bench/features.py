"""What the feature measurements run: RL.ALL over 2 and 4 keys, the BAN and WAIT options on
calls that are admitted, and an RL.ACQUIRE + RL.RELEASE pair on a key holding 100 leases, each
beside the single command or INCRs it is held to. Shared by bench/instr.py (instructions per
call under callgrind, `make bench-features-instr`) and bench/waiters.py (wall clock,
`make bench-features`). Python 3 standard library only.

An "operation" is one or more commands (the lease pair is two); each is measured on keys that
exist (made by the same operation beforehand, "prepare", not measured) and is admitted. Every
period is an hour long, so that no key expires or refills to full while measured (under
callgrind the master runs ~50× slower than normal: a 1 s period would expire keys between the
preparation and the measured call).
"""

from dataclasses import dataclass, field

from resp import ReplyError

LEASES_HELD = 100  # leases held on the pool key while the pairs are measured


def key(i):
    return f"k:{i:06d}"


def tagged(i, suffix):
    return f"{{u{i:06d}}}:{suffix}"  # one slot per user, as RL.ALL needs in a cluster


@dataclass
class Op:
    name: str  # the row
    commands: object  # i -> [command, …], one operation
    prepare: object = None  # n -> [command, …] run (pipelined, not measured) before; checked
    checks: object = None  # (i, replies of one operation) -> error text or None
    note: str = ""  # the arguments, shown in the notes
    stats: list = field(default_factory=list)  # INFO commandstats names (wall clock)


def admitted5(reply):
    return isinstance(reply, list) and len(reply) == 5 and reply[0] == 1


def check_rl(_i, replies):
    for r in replies:
        if not admitted5(r):
            return f"not admitted: {r!r}"
    return None


def check_all(_i, replies):
    for r in replies:
        if not (isinstance(r, list) and len(r) == 7 and r[0] == 1):
            return f"RL.ALL not admitted: {r!r}"
    return None


def check_int(_i, replies):
    for r in replies:
        if not isinstance(r, int):
            return f"not an integer: {r!r}"
    return None


def check_ping(_i, replies):
    return None if replies == ["PONG"] else f"not PONG: {replies!r}"


def check_lease_pair(i, replies):
    acq, rel = replies
    if not (isinstance(acq, list) and len(acq) == 6 and acq[0] == 1 and acq[5] == f"w{i}"):
        return f"RL.ACQUIRE not admitted with its ID: {acq!r}"
    if rel != 1:
        return f"RL.RELEASE did not release: {rel!r}"
    if acq[2] != 1000 - LEASES_HELD - 1:
        return f"RL.ACQUIRE: {1000 - acq[2]} leases held, not {LEASES_HELD + 1}"
    return None


def same_prepare(op_commands):
    """Prepare = the operation itself once on every key (it creates them)."""
    return lambda n: [c for i in range(n) for c in op_commands(i)]


TOKEN = ["100", "1", "1h"]
PERIOD = ["1000", "1h"]


def rl_all(n):
    limits = (["TOKEN"] + TOKEN, ["PERIOD"] + PERIOD) * (n // 2)
    suffixes = "abcd"[:n]

    def commands(i):
        cmd = ["RL.ALL", str(n)] + [tagged(i, s) for s in suffixes]
        for limit in limits:
            cmd += limit
        return [cmd]
    return commands


def lease_pair(i):
    return [["RL.ACQUIRE", "pool", "1000", "1h", "ID", f"w{i}"], ["RL.RELEASE", "pool", f"w{i}"]]


def single(*args):
    return lambda i: [[a.replace("{key}", key(i)) for a in args]]


OPS = [
    Op("PING", lambda i: [["PING"]], checks=check_ping, note="`PING`", stats=["ping"]),
    Op("INCR", single("INCR", "{key}"), checks=check_int, note="`INCR k`", stats=["incr"]),
    Op("INCR ×2", lambda i: [["INCR", key(i)], ["INCR", key(i)]], checks=check_int,
       note="`INCR k` twice (two commands)", stats=["incr"]),
    Op("RL.TOKEN", single("RL.TOKEN", "{key}", *TOKEN), checks=check_rl,
       note="`RL.TOKEN k 100 1 1h`", stats=["rl.token"]),
    Op("RL.PERIOD", single("RL.PERIOD", "{key}", *PERIOD), checks=check_rl,
       note="`RL.PERIOD k 1000 1h`", stats=["rl.period"]),
    Op("RL.ALL 2 keys", rl_all(2), checks=check_all,
       note="`RL.ALL 2 {u}:a {u}:b TOKEN 100 1 1h PERIOD 1000 1h`", stats=["rl.all"]),
    Op("RL.ALL 4 keys", rl_all(4), checks=check_all,
       note="`RL.ALL 4 {u}:a {u}:b {u}:c {u}:d TOKEN 100 1 1h PERIOD 1000 1h TOKEN 100 1 1h "
            "PERIOD 1000 1h`", stats=["rl.all"]),
    Op("RL.TOKEN COST 1", single("RL.TOKEN", "{key}", *TOKEN, "COST", "1"), checks=check_rl,
       note="`RL.TOKEN k 100 1 1h COST 1` (the default cost spelled out: the same call with "
            "two more arguments, the control for BAN and WAIT)", stats=["rl.token"]),
    Op("RL.TOKEN BAN", single("RL.TOKEN", "{key}", *TOKEN, "BAN", "1h"), checks=check_rl,
       note="`RL.TOKEN k 100 1 1h BAN 1h`", stats=["rl.token"]),
    Op("RL.TOKEN WAIT", single("RL.TOKEN", "{key}", *TOKEN, "WAIT", "5s"), checks=check_rl,
       note="`RL.TOKEN k 100 1 1h WAIT 5s`", stats=["rl.token"]),
    Op("RL.ACQUIRE + RL.RELEASE", lease_pair,
       prepare=lambda n: [["RL.ACQUIRE", "pool", "1000", "1h"] for _ in range(LEASES_HELD)],
       checks=check_lease_pair,
       note=f"`RL.ACQUIRE pool 1000 1h ID w<i>` + `RL.RELEASE pool w<i>` with {LEASES_HELD} "
            f"leases held (made by `RL.ACQUIRE pool 1000 1h`)",
       stats=["rl.acquire", "rl.release"]),
]
for _op in OPS:
    if _op.prepare is None and _op.name != "PING":
        _op.prepare = same_prepare(_op.commands)
BY_NAME = {op.name: op for op in OPS}

# (row, reference row(s) — a tuple is summed —, how the row is held to it, bar): the targets,
# then comparisons without a target of their own (bar None).
#   ratio: row ÷ reference ≤ bar;  delta: row − reference ≤ bar × reference;  absdelta:
#   |row − reference| ≤ bar × reference (bar a fraction: 0.5 %, the spread of repetitions).
TARGETS = [
    ("RL.ALL 2 keys", "RL.TOKEN", "ratio", 1.7),
    ("RL.ALL 4 keys", "RL.TOKEN", "ratio", 3.0),
    ("RL.TOKEN BAN", "RL.TOKEN", "absdelta", 0.005),
    ("RL.TOKEN WAIT", "RL.TOKEN", "delta", 0.005),
    ("RL.ACQUIRE + RL.RELEASE", "INCR ×2", "ratio", 2.0),
    ("RL.ALL 2 keys", ("RL.TOKEN", "RL.PERIOD"), "ratio", None),
    ("RL.ALL 4 keys", ("RL.TOKEN", "RL.PERIOD", "RL.TOKEN", "RL.PERIOD"), "ratio", None),
    ("RL.TOKEN BAN", "RL.TOKEN COST 1", "absdelta", None),
    ("RL.TOKEN WAIT", "RL.TOKEN COST 1", "delta", None),
]


def ref_name(ref):
    return ref if isinstance(ref, str) else " + ".join(ref)


def ref_value(ref, value_of):
    return value_of(ref) if isinstance(ref, str) else sum(value_of(r) for r in ref)


def verdict(kind, value, ref, bar):
    """(shown figure, pass? — None without a bar) of one target."""
    if kind == "ratio":
        q = value / ref
        if bar is None:
            return f"{q:.2f}×", None
        return f"{q:.2f}× (≤ {bar:g}×)", q <= bar
    d = value - ref
    if bar is None:
        return f"{d:+,.0f} ({d / ref:+.2%})", None
    if kind == "absdelta":
        return f"{d:+,.0f} ({d / ref:+.2%}; within ±{bar:.1%})", abs(d) <= bar * ref
    return f"{d:+,.0f} ({d / ref:+.2%}; ≤ +{bar:.1%})", d <= bar * ref


def prepare_and_check(conn, op, n):
    """Runs op.prepare (n operations' keys) pipelined; raises on any error or refusal."""
    if op.prepare is None:
        return
    cmds = op.prepare(n)
    replies = conn.pipeline(cmds)
    bad = [r for r in replies if isinstance(r, ReplyError)
           or (isinstance(r, list) and r and r[0] != 1)]
    if bad:
        raise RuntimeError(f"{op.name}: preparing: {len(bad)} bad replies, first {bad[0]!r}")


def check_replies(op, n, replies):
    """replies: every reply of n operations, in order."""
    per = len(op.commands(0))
    for i in range(n):
        chunk = replies[i * per : (i + 1) * per]
        errors = [r for r in chunk if isinstance(r, ReplyError)]
        why = f"error {errors[0]}" if errors else op.checks(i, chunk)
        if why:
            raise RuntimeError(f"{op.name}, operation {i}: {why}")
