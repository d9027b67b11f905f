"""Memory per key on each server: `used_memory` grown by 100 000 keys of one form, divided by
the keys, beside `MEMORY USAGE` of one of them and `INCR` + TTL (the floor), on a fresh server.

    python3 bench/memory_servers.py --module target/release/libredis_ratelimit.so \
        [--server redis-server] [--keys 100000]

docs/benchmarks.md ("Memory per key on newer servers") has the figures.
"""

import argparse
import os
import shutil
import socket
import subprocess
import tempfile
import time

import redis

FORMS = [
    ("INCR + PEXPIRE", lambda k: [("INCR", k), ("PEXPIRE", k, 3_600_000)]),
    ("RL.TOKEN k 100 1 1h", lambda k: [("RL.TOKEN", k, 100, 1, "1h")]),
    ("RL.PERIOD k 100 1h", lambda k: [("RL.PERIOD", k, 100, "1h")]),
    ("RL.SLIDE k 100 1h", lambda k: [("RL.SLIDE", k, 100, "1h")]),
    ("RL.LEAKY k 100 1 1h", lambda k: [("RL.LEAKY", k, 100, 1, "1h")]),
    ("CL.THROTTLE k 9 1 60", lambda k: [("CL.THROTTLE", k, 9, 1, 60)]),
    ("RL.TOKEN k 100 1 1h STEP", lambda k: [("RL.TOKEN", k, 100, 1, "1h", "STEP")]),
]


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def measure(server, module, form, keys):
    directory = tempfile.mkdtemp(prefix="rl-mem-")
    port = free_port()
    log = open(os.path.join(directory, "server.log"), "ab")
    proc = subprocess.Popen([server, "--port", str(port), "--bind", "127.0.0.1", "--dir",
                             directory, "--save", "", "--appendonly", "no",
                             "--loadmodule", module], stdout=log, stderr=log)
    try:
        client = redis.Redis(host="127.0.0.1", port=port)
        deadline = time.time() + 15
        while True:
            try:
                client.ping()
                break
            except redis.ConnectionError:
                if time.time() > deadline:
                    raise
                time.sleep(0.01)
        before = client.info("memory")["used_memory"]
        make = dict(FORMS)[form]
        pipe = client.pipeline(transaction=False)
        for i in range(keys):
            for command in make(f"key:{i:08}"):
                pipe.execute_command(*command)
            if i % 1000 == 999:
                pipe.execute()
        pipe.execute()
        after = client.info("memory")["used_memory"]
        usage = client.execute_command("MEMORY", "USAGE", "key:00000000")
        return (after - before) / keys, usage
    finally:
        proc.kill()
        proc.wait()
        shutil.rmtree(directory, ignore_errors=True)


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--server", default="redis-server")
    parser.add_argument("--module", required=True)
    parser.add_argument("--keys", type=int, default=100_000)
    a = parser.parse_args()
    version = subprocess.run([a.server, "--version"], capture_output=True, text=True).stdout
    print(f"# {version.strip()}, {a.keys} keys per form")
    print("| form | bytes/key (used_memory) | MEMORY USAGE |")
    print("|---|---|---|")
    for form, _ in FORMS:
        per_key, usage = measure(a.server, a.module, form, a.keys)
        print(f"| `{form}` | {per_key:.1f} | {usage} |")


if __name__ == "__main__":
    main()
