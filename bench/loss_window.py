"""The loss window under `appendonly yes` + `appendfsync everysec`, measured by `kill -9`.

One client admits calls on one key (`RL.PERIOD k 1000000000 1d`, each admission one permit)
as fast as a single connection goes, noting when each was acknowledged; the server is killed
with SIGKILL at a random instant, restarted on the same directory (it replays its AOF), and the
key's count read back. `missing` = acknowledged − persisted admissions, and the window is the
time between the last acknowledgement that survived and the kill. Repeated `--runs` times.

    python3 bench/loss_window.py --module target/release/libredis_ratelimit.so \
        [--server redis-server] [--runs 20] [--seconds 3]

This measures a *process* crash. The page cache outlives the process, so it shows only what
the server had not yet written (`write(2)`) when it died; an OS crash or power loss also loses
what was written but not yet fsynced, which no `kill -9` can show (docs/guarantees.md).
"""

import argparse
import os
import random
import shutil
import signal
import socket
import statistics
import subprocess
import sys
import tempfile
import threading
import time

import redis


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def start(server, module, directory, port):
    args = [server, "--port", str(port), "--bind", "127.0.0.1", "--dir", directory,
            "--save", "", "--appendonly", "yes", "--appendfsync", "everysec",
            "--loadmodule", module]
    log = open(os.path.join(directory, "server.log"), "ab")
    proc = subprocess.Popen(args, stdout=log, stderr=log)
    client = redis.Redis(host="127.0.0.1", port=port)
    deadline = time.time() + 15
    while True:
        try:
            client.ping()
            return proc, client
        except (redis.ConnectionError, redis.BusyLoadingError):
            if time.time() > deadline or proc.poll() is not None:
                raise RuntimeError(open(os.path.join(directory, "server.log")).read())
            time.sleep(0.01)


def one_run(server, module, seconds):
    directory = tempfile.mkdtemp(prefix="rl-loss-")
    port = free_port()
    try:
        proc, client = start(server, module, directory, port)
        acks = []
        stop = threading.Event()

        def traffic():
            while not stop.is_set():
                try:
                    reply = client.execute_command("RL.PERIOD", "k", 1_000_000_000, "1d")
                except redis.ConnectionError:
                    return
                if reply[0] == 1:
                    acks.append(time.monotonic())

        thread = threading.Thread(target=traffic)
        thread.start()
        time.sleep(seconds * random.uniform(0.5, 1.0))
        killed_at = time.monotonic()
        proc.send_signal(signal.SIGKILL)
        proc.wait()
        stop.set()
        thread.join()
        acknowledged = len(acks)
        proc, client = start(server, module, directory, port)
        reply = client.execute_command("RL.PERIOD", "k", 1_000_000_000, "1d", "DRYRUN")
        persisted = 1_000_000_000 - reply[2] - 1
        proc.send_signal(signal.SIGKILL)
        proc.wait()
        missing = acknowledged - persisted
        window_ms = 0.0
        if missing > 0:
            last_kept = acks[persisted - 1] if persisted > 0 else acks[0]
            window_ms = (killed_at - last_kept) * 1000
        return acknowledged, persisted, missing, window_ms
    finally:
        shutil.rmtree(directory, ignore_errors=True)


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--server", default="redis-server")
    parser.add_argument("--module", required=True)
    parser.add_argument("--runs", type=int, default=20)
    parser.add_argument("--seconds", type=float, default=3.0)
    a = parser.parse_args()
    version = subprocess.run([a.server, "--version"], capture_output=True, text=True).stdout
    print(f"# {version.strip()}; appendonly yes, appendfsync everysec; kill -9 after "
          f"{a.seconds / 2:.1f}-{a.seconds:.1f} s of one connection's calls")
    rows = []
    for i in range(a.runs):
        acknowledged, persisted, missing, window_ms = one_run(a.server, a.module, a.seconds)
        rows.append((missing, window_ms))
        print(f"run {i + 1:2}: acknowledged {acknowledged:6}  persisted {persisted:6}  "
              f"missing {missing:4}  window {window_ms:7.1f} ms")
        if persisted > acknowledged:
            print("  persisted more than acknowledged (a call applied, its reply lost)")
    missing = [m for m, _ in rows]
    windows = [w for _, w in rows]
    print(f"missing admissions: max {max(missing)}, median {statistics.median(missing)}; "
          f"window: max {max(windows):.1f} ms, median {statistics.median(windows):.1f} ms; "
          f"runs losing anything: {sum(1 for m in missing if m > 0)}/{len(rows)}")


if __name__ == "__main__":
    sys.exit(main())
