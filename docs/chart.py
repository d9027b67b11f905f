"""A picture of every algorithm: the same bursty traffic through each limiter of the module.

    python3 docs/chart.py [--addr HOST:PORT | --module PATH] [--out docs/algorithms.png]
                          [--no-plot]

Traffic (simulated time, sent with `AT <ms>` so it runs in well under a second): a burst of
300 requests at t = 0, then a steady 5 requests per second for 2 minutes (600 more). Every
limiter allows 100 per minute. Each algorithm gets its own key on a real server with the
module: `--addr` takes a running one; otherwise the script starts a private `redis-server`
(`$RL_SERVER`, default redis-server) on a unix socket in a temporary directory with
`--module` (default: target/release/libredis_ratelimit.so, else the debug build's).

It prints one line per algorithm (admitted, refused, admitted in the burst) and, unless
`--no-plot` (or matplotlib is missing), draws one panel per algorithm, same axes: cumulative
requests over time, admitted and refused. tests/chart.rs runs it with `--no-plot`.
"""

import argparse
import os
import shutil
import subprocess
import sys
import tempfile
import time

import redis

T0 = 1_800_000_020_000  # 20 s past a UTC minute boundary: ALIGN windows end at t = 40 s, 100 s
BURST = 300
STEADY_PER_S = 5
SECONDS = 120

# (panel title, command words before AT)
ALGORITHMS = [
    ("RL.TOKEN 100 100 1m", ["RL.TOKEN", "k:token", 100, 100, "1m"]),
    ("RL.PERIOD 100 1m", ["RL.PERIOD", "k:period", 100, "1m"]),
    ("RL.PERIOD 100 1m ALIGN", ["RL.PERIOD", "k:align", 100, "1m", "ALIGN"]),
    ("RL.SLIDE 100 1m (exact)", ["RL.SLIDE", "k:slide", 100, "1m"]),
    ("RL.SLIDE 100 1m BUCKETS 6", ["RL.SLIDE", "k:buckets", 100, "1m", "BUCKETS", 6]),
    ("RL.LEAKY 100 100 1m (delay)", ["RL.LEAKY", "k:leaky", 100, 100, "1m"]),
    ("RL.LEAKY 100 100 1m NODELAY", ["RL.LEAKY", "k:nodelay", 100, 100, "1m", "NODELAY"]),
    ("CL.THROTTLE 99 100 60", ["CL.THROTTLE", "k:gcra", 99, 100, 60]),
]


def traffic():
    """Request times in ms from t = 0."""
    times = [0] * BURST
    times += [k * 1000 // STEADY_PER_S for k in range(1, SECONDS * STEADY_PER_S + 1)]
    return times


def drive(r, words, times):
    """Sends every request at its instant; returns (admitted, delay_ms) per request."""
    pipe = r.pipeline(transaction=False)
    for t in times:
        pipe.execute_command(*words, "AT", T0 + t)
    out = []
    for reply in pipe.execute():
        if words[0] == "CL.THROTTLE":
            out.append((reply[0] == 0, 0))
        else:
            out.append((reply[0] == 1, reply[3] if reply[0] == 1 else 0))
    return out


def start_server(module):
    server = os.environ.get("RL_SERVER") or "redis-server"
    d = tempfile.mkdtemp(prefix="rl-chart-")
    sock = os.path.join(d, "redis.sock")
    proc = subprocess.Popen(
        [server, "--port", "0", "--unixsocket", sock, "--dir", d, "--save", "",
         "--appendonly", "no", "--loadmodule", module],
        stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
    )
    deadline = time.monotonic() + 15
    while True:
        try:
            r = redis.Redis(unix_socket_path=sock)
            r.ping()
            return r, proc, d
        except (redis.ConnectionError, FileNotFoundError):
            if proc.poll() is not None or time.monotonic() > deadline:
                proc.kill()
                sys.exit(f"{server} with {module} did not start")
            time.sleep(0.05)


def default_module():
    root = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    for profile in ("release", "debug", "debug/deps"):
        p = os.path.join(root, "target", profile, "libredis_ratelimit.so")
        if os.path.exists(p):
            return p
    sys.exit("no target/{release,debug}/libredis_ratelimit.so: run `make build` or give --module")


def plot(results, times, out):
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    xs = [t / 1000 for t in times]
    offered = list(range(1, len(times) + 1))
    fig, axes = plt.subplots(3, 3, figsize=(15, 12), sharex=True, sharey=True)
    for ax, (title, decisions) in zip(axes.flat, results):
        admitted, n = [], 0
        for ok, _ in decisions:
            n += ok
            admitted.append(n)
        ax.fill_between(xs, 0, admitted, step="post", color="#2e8b57", alpha=0.85,
                        label="admitted")
        ax.fill_between(xs, admitted, offered, step="post", color="#d9534f", alpha=0.35,
                        label="refused")
        if "(delay)" in title:
            proceeds = sorted((t + d) / 1000 for t, (ok, d) in zip(times, decisions) if ok)
            ax.step(proceeds, range(1, len(proceeds) + 1), where="post", color="black",
                    linestyle="--", linewidth=1.4, label="admitted requests proceeding\n(after the delay the reply gives)")
        ax.set_title(f"{title}\nadmitted {n}, refused {len(times) - n}", fontsize=11)
        ax.set_xlim(0, SECONDS)
        ax.set_ylim(0, len(times))
        ax.set_xticks(range(0, SECONDS + 1, 20))
        ax.grid(alpha=0.3)
    legend_ax = axes.flat[len(results)]
    handles, labels = [], []
    for ax in axes.flat[: len(results)]:
        for h, label in zip(*ax.get_legend_handles_labels()):
            if label not in labels:
                handles.append(h)
                labels.append(label)
    legend_ax.axis("off")
    legend_ax.legend(handles, labels, loc="upper center", fontsize=12, frameon=False)
    legend_ax.text(
        0.5, 0.25,
        "traffic: 300 requests at t=0,\nthen 5 per second for 2 minutes\n"
        "every limiter: 100 per minute\n(ALIGN: minute boundaries at t=40 s, 100 s)",
        ha="center", va="center", fontsize=11, transform=legend_ax.transAxes,
    )
    for ax in axes[-1]:
        ax.set_xlabel("time (s)")
    for ax in axes[:, 0]:
        ax.set_ylabel("requests (cumulative)")
    fig.suptitle("The same bursty traffic through every algorithm (driven on the real module)",
                 fontsize=14)
    fig.tight_layout()
    fig.savefig(out, dpi=80)
    print(f"wrote {out}")


def main():
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--addr", help="HOST:PORT of a running server with the module")
    p.add_argument("--module", help="module to load into a private redis-server")
    p.add_argument("--out", default=os.path.join(os.path.dirname(__file__), "algorithms.png"))
    p.add_argument("--no-plot", action="store_true", help="only drive and print the counts")
    a = p.parse_args()

    proc = tmp = None
    if a.addr:
        host, port = a.addr.rsplit(":", 1)
        r = redis.Redis(host=host, port=int(port))
    else:
        r, proc, tmp = start_server(os.path.abspath(a.module or default_module()))
    try:
        times = traffic()
        results = []
        for title, words in ALGORITHMS:
            r.delete(words[1])
            decisions = drive(r, words, times)
            results.append((title, decisions))
            admitted = sum(ok for ok, _ in decisions)
            burst = sum(ok for ok, _ in decisions[:BURST])
            print(f"{title}: admitted={admitted} refused={len(times) - admitted} "
                  f"burst_admitted={burst}")
    finally:
        if proc:
            proc.kill()
            proc.wait()
            shutil.rmtree(tmp, ignore_errors=True)
    if a.no_plot:
        return
    try:
        import matplotlib  # noqa: F401
    except ImportError:
        print("matplotlib is not installed: no picture drawn (make chart installs it)")
        return
    plot(results, times, a.out)


if __name__ == "__main__":
    main()
