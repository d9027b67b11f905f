"""What one `RL.TOP` call costs the server, by its own accounting: `INFO commandstats`
(`usec_per_call` of `rl.top`) and the latency monitor's worst `command` event, for
`ratelimit.top-k` 256 (the default) and 10 000 (the most), with the summary full (more distinct
keys refused than counters) and `COUNT` 10, 256, 1000 and 20 000.

    python3 bench/top_cost.py --module target/release/libredis_ratelimit.so \
        [--server redis-server] [--calls 20]

docs/observability.md ("What RL.TOP costs") has the figures.
"""

import argparse
import os
import shutil
import socket
import subprocess
import tempfile
import time

import redis


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def start(server, module):
    directory = tempfile.mkdtemp(prefix="rl-top-")
    port = free_port()
    log = open(os.path.join(directory, "server.log"), "ab")
    proc = subprocess.Popen([server, "--port", str(port), "--bind", "127.0.0.1", "--dir",
                             directory, "--save", "", "--appendonly", "no",
                             "--latency-monitor-threshold", "1", "--loadmodule", module],
                            stdout=log, stderr=log)
    client = redis.Redis(host="127.0.0.1", port=port)
    deadline = time.time() + 15
    while True:
        try:
            client.ping()
            return proc, client, directory
        except redis.ConnectionError:
            if time.time() > deadline:
                raise
            time.sleep(0.01)


def refuse(client, keys):
    """Each key admitted once, then refused once (a counter per key in the summary)."""
    pipe = client.pipeline(transaction=False)
    for i in range(keys):
        key = f"tenant:{i:08}"
        pipe.execute_command("RL.TOKEN", key, 1, 1, "1h")
        pipe.execute_command("RL.TOKEN", key, 1, 1, "1h")
        if i % 1000 == 999:
            pipe.execute()
    pipe.execute()


def cost(client, count, calls):
    client.execute_command("CONFIG", "RESETSTAT")
    client.execute_command("LATENCY", "RESET")
    rows = 0
    for _ in range(calls):
        rows = len(client.execute_command("RL.TOP", "COUNT", count))
    stats = client.info("commandstats").get("cmdstat_rl.top", {})
    worst = 0
    for event in client.execute_command("LATENCY", "LATEST"):
        if event[0] in (b"command", "command"):
            worst = int(event[3])
    return rows, stats.get("usec_per_call", 0.0), worst


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--server", default="redis-server")
    parser.add_argument("--module", required=True)
    parser.add_argument("--calls", type=int, default=20)
    a = parser.parse_args()
    version = subprocess.run([a.server, "--version"], capture_output=True, text=True).stdout
    print(f"# {version.strip()}; {a.calls} calls per row")
    print("| ratelimit.top-k | keys refused | COUNT | rows | µs per call (commandstats) "
          "| worst call (latency monitor, ms) |")
    print("|---|---|---|---|---|---|")
    for top_k, keys in ((256, 1000), (10_000, 30_000)):
        proc, client, directory = start(a.server, a.module)
        try:
            client.execute_command("CONFIG", "SET", "ratelimit.top-k", top_k)
            refuse(client, keys)
            for count in (10, 256, 1000, 20_000):
                rows, usec, worst = cost(client, count, a.calls)
                print(f"| {top_k} | {keys} | {count} | {rows} | {usec:,.0f} | {worst} |")
        finally:
            proc.kill()
            proc.wait()
            shutil.rmtree(directory, ignore_errors=True)


if __name__ == "__main__":
    main()
