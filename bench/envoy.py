"""The Envoy rate-limit service benchmark (bench/envoy.sh runs it; writes bench/ENVOY.md).

For each service (ours: `redis-ratelimit envoy`; theirs: envoyproxy/ratelimit) and each number
of descriptors per request (1, 2, 4): one Redis with the module, the service started with the
same environment variables and config file, Envoy 1.40 in front, wrk through Envoy. Measured:
requests/s and wrk's p50/p99 latency, Redis CPU per request (INFO cpu, user + sys, before and
after), Redis commands per request (INFO commandstats). Then the refusal run: a request carries
a small limit (100 per hour) and a large one; after the run, how many permits the large one
counted for requests the small one refused.
"""

import argparse
import os
import re
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
import urllib.request

DESCRIPTORS = ["d1", "d2", "d3", "d4"]

CONFIG = """domain: bench
descriptors:
  - key: d1
    rate_limit: {unit: hour, requests_per_unit: 1000000000}
  - key: d2
    rate_limit: {unit: hour, requests_per_unit: 1000000000}
  - key: d3
    rate_limit: {unit: hour, requests_per_unit: 1000000000}
  - key: d4
    rate_limit: {unit: hour, requests_per_unit: 1000000000}
  - key: small
    rate_limit: {unit: hour, requests_per_unit: 100}
"""

ENVOY = """
admin:
  address: {socket_address: {address: 127.0.0.1, port_value: %(admin)d}}
static_resources:
  listeners:
  - name: main
    address: {socket_address: {address: 127.0.0.1, port_value: %(listen)d}}
    filter_chains:
    - filters:
      - name: envoy.filters.network.http_connection_manager
        typed_config:
          "@type": type.googleapis.com/envoy.extensions.filters.network.http_connection_manager.v3.HttpConnectionManager
          stat_prefix: ingress
          route_config:
            virtual_hosts:
            - name: all
              domains: ["*"]
              routes:
              - match: {prefix: "/"}
                route:
                  cluster: backend
                  prefix_rewrite: "/healthcheck"
                  rate_limits:
%(actions)s
          http_filters:
          - name: envoy.filters.http.ratelimit
            typed_config:
              "@type": type.googleapis.com/envoy.extensions.filters.http.ratelimit.v3.RateLimit
              domain: bench
              failure_mode_deny: true
              timeout: 1s
              rate_limit_service:
                transport_api_version: V3
                grpc_service: {envoy_grpc: {cluster_name: ratelimit}}
          - name: envoy.filters.http.router
            typed_config:
              "@type": type.googleapis.com/envoy.extensions.filters.http.router.v3.Router
  clusters:
  - name: backend
    type: STATIC
    load_assignment:
      cluster_name: backend
      endpoints: [{lb_endpoints: [{endpoint: {address: {socket_address: {address: 127.0.0.1, port_value: %(http)d}}}}]}]
  - name: ratelimit
    type: STATIC
    typed_extension_protocol_options:
      envoy.extensions.upstreams.http.v3.HttpProtocolOptions:
        "@type": type.googleapis.com/envoy.extensions.upstreams.http.v3.HttpProtocolOptions
        explicit_http_config: {http2_protocol_options: {}}
    load_assignment:
      cluster_name: ratelimit
      endpoints: [{lb_endpoints: [{endpoint: {address: {socket_address: {address: 127.0.0.1, port_value: %(grpc)d}}}}]}]
"""

# wrk: d1 is a user out of 10 000 (a key per user), the others one value each.
WRK_SCRIPT = """
math.randomseed(42)
local n = tonumber(os.getenv("BENCH_DESCRIPTORS") or "1")
request = function()
  local h = {["x-d1"] = tostring(math.random(1, 10000))}
  if n >= 2 then h["x-d2"] = "route" end
  if n >= 4 then h["x-d3"] = "tenant"; h["x-d4"] = "global" end
  if os.getenv("BENCH_REFUSAL") then h = {["x-small"] = "s", ["x-d2"] = "refusal"} end
  return wrk.format("GET", "/", h)
end
"""


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def wait(what, ok, seconds=30):
    deadline = time.time() + seconds
    while time.time() < deadline:
        try:
            if ok():
                return
        except Exception:
            pass
        time.sleep(0.05)
    sys.exit(f"bench-envoy: {what} not ready within {seconds} s")


def http_ok(port, path):
    with urllib.request.urlopen(f"http://127.0.0.1:{port}{path}", timeout=2) as r:
        return r.status == 200


class Redis:
    def __init__(self, module, work):
        self.port = free_port()
        self.dir = tempfile.mkdtemp(dir=work)
        self.proc = subprocess.Popen(
            ["redis-server", "--port", str(self.port), "--bind", "127.0.0.1", "--save", "",
             "--appendonly", "no", "--dir", self.dir, "--loadmodule", module],
            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        wait("redis", lambda: self.cli("PING") == "PONG")

    def cli(self, *args):
        out = subprocess.run(["redis-cli", "-p", str(self.port), *args], capture_output=True,
                             text=True, check=True)
        return out.stdout.strip()

    def info(self, section):
        fields = {}
        for line in self.cli("INFO", section).splitlines():
            if ":" in line:
                k, v = line.split(":", 1)
                fields[k] = v
        return fields

    def cpu(self):
        i = self.info("cpu")
        return float(i["used_cpu_sys"]) + float(i["used_cpu_user"])

    def reads(self):
        """Reads of client input so far (INFO stats): one per batch of commands that arrived
        together."""
        return int(self.info("stats")["total_reads_processed"])

    def calls(self):
        """Calls and microseconds spent in them (INFO commandstats), rate-limit work only."""
        calls = usec = 0
        for k, v in self.info("commandstats").items():
            name = k[len("cmdstat_"):] if k.startswith("cmdstat_") else None
            if name in ("rl.all", "rl.refund", "incrby", "expire", "multi", "exec"):
                calls += int(re.search(r"calls=(\d+)", v).group(1))
                usec += int(re.search(r"usec=(\d+)", v).group(1))
        return calls, usec

    def stop(self):
        self.proc.terminate()
        self.proc.wait()
        shutil.rmtree(self.dir, ignore_errors=True)


def start(cmd, env, log):
    return subprocess.Popen(cmd, env=env, stdout=log, stderr=subprocess.STDOUT)


def stop(proc):
    if proc.poll() is None:
        proc.send_signal(signal.SIGTERM)
        try:
            proc.wait(10)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()


def parse_wrk(text):
    def latency(p):
        m = re.search(r"^\s*%s%%\s+([\d.]+)(us|ms|s)\s*$" % p, text, re.M)
        value, unit = float(m.group(1)), m.group(2)
        return value / 1000 if unit == "us" else value * 1000 if unit == "s" else value
    total = int(re.search(r"(\d+) requests in", text).group(1))
    non2xx = re.search(r"Non-2xx or 3xx responses: (\d+)", text)
    return {
        "rps": float(re.search(r"Requests/sec:\s+([\d.]+)", text).group(1)),
        "p50": latency(50), "p99": latency(99), "total": total,
        "refused": int(non2xx.group(1)) if non2xx else 0,
    }


def run_one(args, which, binary, module, n, seconds, connections, refusal=False):
    redis = Redis(module, args.work)
    runtime = tempfile.mkdtemp(dir=args.work)
    os.makedirs(os.path.join(runtime, "ratelimit", "config"))
    with open(os.path.join(runtime, "ratelimit", "config", "config.yaml"), "w") as f:
        f.write(CONFIG)
    grpc, http, debug, listen, admin = (free_port() for _ in range(5))
    # The same variables for both services.
    env = {
        "PATH": os.environ.get("PATH", ""), "HOME": os.environ.get("HOME", "/tmp"),
        "GRPC_HOST": "127.0.0.1", "GRPC_PORT": str(grpc), "HOST": "127.0.0.1", "PORT": str(http),
        "DEBUG_HOST": "127.0.0.1", "DEBUG_PORT": str(debug), "USE_STATSD": "false",
        "LOG_LEVEL": "warn", "REDIS_SOCKET_TYPE": "tcp", "REDIS_URL": f"127.0.0.1:{redis.port}",
        "REDIS_POOL_SIZE": os.environ.get("BENCH_POOL", "10"), "RUNTIME_ROOT": runtime, "RUNTIME_SUBDIRECTORY": "ratelimit",
        "RUNTIME_WATCH_ROOT": "false",
    }
    log = open(os.path.join(args.work, f"{which}.log"), "a")
    service = start([binary] + (["envoy"] if which == "ours" else []), env, log)
    wait(f"{which} service", lambda: http_ok(http, "/healthcheck"))
    actions = "\n".join(
        f"                  - actions: [{{request_headers: {{header_name: x-{d}, descriptor_key: {d}}}}}]"
        for d in DESCRIPTORS + ["small"])
    config = os.path.join(runtime, "envoy.yaml")
    with open(config, "w") as f:
        f.write(ENVOY % {"admin": admin, "listen": listen, "actions": actions, "http": http,
                         "grpc": grpc})
    envoy = start([args.envoy, "-c", config, "--concurrency", "1", "--disable-hot-restart",
                   "--log-level", "warn"], env, log)
    wait("envoy", lambda: http_ok(admin, "/ready"))
    script = os.path.join(runtime, "bench.lua")
    with open(script, "w") as f:
        f.write(WRK_SCRIPT)
    wrk_env = dict(os.environ, BENCH_DESCRIPTORS=str(n))
    if refusal:
        wrk_env["BENCH_REFUSAL"] = "1"
    # Warm up (connections, keys), then measure from a clean slate.
    subprocess.run(["wrk", "-t1", f"-c{connections}", "-d1s", "-s", script,
                    f"http://127.0.0.1:{listen}/"], env=wrk_env, capture_output=True)
    redis.cli("FLUSHALL")
    redis.cli("CONFIG", "RESETSTAT")
    cpu0, reads0 = redis.cpu(), redis.reads()
    out = subprocess.run(["wrk", "-t1", f"-c{connections}", f"-d{seconds}s", "--latency", "-s",
                          script, f"http://127.0.0.1:{listen}/"], env=wrk_env, capture_output=True,
                         text=True, check=True).stdout
    cpu1, reads1 = redis.cpu(), redis.reads()
    result = parse_wrk(out)
    result["cpu_us"] = (cpu1 - cpu0) * 1e6 / max(result["total"], 1)
    result["reads"] = (reads1 - reads0) / max(result["total"], 1)
    calls, usec = redis.calls()
    result["calls"] = calls / max(result["total"], 1)
    result["cmd_us"] = usec / max(result["total"], 1)
    if refusal:
        admitted = result["total"] - result["refused"]
        if which == "ours":
            peek = redis.cli("RL.PEEK", "bench_d2_refusal_").split()
            # RL.PEEK answers as one more request would: remaining after taking one.
            counted = int(peek[1]) - int(peek[2]) - 1
        else:
            keys = redis.cli("KEYS", "bench_d2_refusal_*").split()
            counted = sum(int(redis.cli("GET", k)) for k in keys)
        result["admitted"] = admitted
        result["counted"] = counted
    stop(envoy)
    stop(service)
    redis.stop()
    shutil.rmtree(runtime, ignore_errors=True)
    return result


def commands_alone(args):
    """What one request costs Redis in commands alone, without Envoy or a service:
    redis-benchmark (8 connections, 100 000 calls) of the call each service sends for 1, 2 and
    4 fixed-window descriptors, INFO commandstats usec per call."""
    out = {}
    redis = Redis(args.module, args.work)
    limit = ["PERIOD", "1000000000", "3600000", "ALIGN"]
    for n in (1, 2, 4):
        keys = [f"{{bench}}k{i}" for i in range(n)]
        ours = ["RL.ALL", str(n), *keys, *(limit * n), "DEADLINE", "99999999999999"]
        redis.cli("CONFIG", "RESETSTAT")
        subprocess.run(["redis-benchmark", "-p", str(redis.port), "-n", "100000", "-c", "8", "-q",
                        *ours], capture_output=True, check=True)
        _, ours_usec = redis.calls()
        # Theirs: INCRBY and EXPIRE per descriptor, pipelined (-P 2n keeps them in one batch).
        redis.cli("CONFIG", "RESETSTAT")
        for cmd in (["INCRBY", "counter", "1"], ["EXPIRE", "counter", "3600"]):
            subprocess.run(["redis-benchmark", "-p", str(redis.port), "-n", "100000", "-c", "8",
                            "-q", *cmd], capture_output=True, check=True)
        _, pair_usec = redis.calls()
        out[n] = (ours_usec / 100000, n * pair_usec / 100000)
    redis.stop()
    return out


def kept_sections(path, generated):
    """The sections of the file at `path` this script does not write (rows measured by
    bench/envoy-grpc.sh, written by hand): kept, in order, after the generated ones."""
    try:
        with open(path) as f:
            text = f.read()
    except FileNotFoundError:
        return []
    kept, keep = [], False
    for line in text.rstrip("\n").split("\n"):
        if line.startswith("## "):
            keep = line not in generated
        if keep:
            kept.append(line)
    return kept + [""] if kept else []


def main():
    p = argparse.ArgumentParser()
    for a in ["envoy", "theirs", "ours", "module", "work", "out", "theirs-version"]:
        p.add_argument("--" + a, required=True)
    args = p.parse_args()
    load_at_start = os.getloadavg()[0]
    seconds = int(os.environ.get("BENCH_SECONDS", "8"))
    connections = int(os.environ.get("BENCH_CONNECTIONS", "32"))
    services = [("ours", args.ours), ("theirs", args.theirs)]
    alone = commands_alone(args)
    print(f"commands alone: {alone}", file=sys.stderr)
    rows = []
    for n in (1, 2, 4):
        for which, binary in services:
            r = run_one(args, which, binary, args.module, n, seconds, connections)
            print(f"{which} {n} descriptors: {r}", file=sys.stderr)
            rows.append((n, which, r))
    refusal = {}
    for which, binary in services:
        refusal[which] = run_one(args, which, binary, args.module, 2, 3, connections, refusal=True)
        print(f"{which} refusal: {refusal[which]}", file=sys.stderr)
    redis_version = subprocess.run(["redis-server", "--version"], capture_output=True,
                                   text=True).stdout.split()[2]
    names = {"ours": "redis-ratelimit envoy", "theirs": "envoyproxy/ratelimit"}
    lines = [
        "# Envoy rate-limit service: redis-ratelimit envoy vs envoyproxy/ratelimit",
        "",
        f"`make bench-envoy` ({time.strftime('%Y-%m-%d', time.gmtime())}): Envoy 1.40 "
        f"(`--concurrency 1`) in front of each service, the same Redis ({redis_version}, "
        "the module loaded, one server), the same environment variables and config file; "
        f"`wrk -t1 -c{connections} -d{seconds}s` through Envoy; the `d1` descriptor is one of "
        "10 000 users, the others one value each; every limit is far from reached. "
        f"envoyproxy/ratelimit is `github.com/envoyproxy/ratelimit@{args.theirs_version}` built with `go "
        "install`. Everything (wrk, Envoy, the service, Redis) shares the machine "
        f"({os.cpu_count()} cores, load average {load_at_start:.2f} when the run began): "
        "compare the rows with each other, not with other machines.",
        "",
        "Redis CPU per request: `used_cpu_user + used_cpu_sys` (INFO cpu) over the run, divided "
        "by the requests — almost all of it is the server's network work (reading each batch "
        "of commands, answering it); in commands: the "
        "time Redis spent executing the rate-limit commands (INFO commandstats `usec`), the "
        "part the module changes; commands per request: INFO commandstats `calls`; reads per "
        "request: INFO stats `total_reads_processed` (one per batch of commands that reached "
        "Redis together: ours pipelines concurrent requests' calls, docs/envoy.md).",
        "",
        "| descriptors | service | requests/s | p50 ms | p99 ms | Redis CPU µs / request "
        "| in commands µs / request | commands / request | Redis reads / request |",
        "|---:|---|---:|---:|---:|---:|---:|---:|---:|",
    ]
    for n, which, r in rows:
        lines.append(f"| {n} | {names[which]} | {r['rps']:.0f} | {r['p50']:.2f} | {r['p99']:.2f} "
                     f"| {r['cpu_us']:.1f} | {r['cmd_us']:.2f} | {r['calls']:.2f} | {r['reads']:.2f} |")
    lines += ["", "Ratios (ours / theirs):", "",
              "| descriptors | requests/s | Redis CPU per request | in commands per request |",
              "|---:|---:|---:|---:|"]
    for n in (1, 2, 4):
        o = next(r for m, w, r in rows if m == n and w == "ours")
        t = next(r for m, w, r in rows if m == n and w == "theirs")
        lines.append(f"| {n} | {o['rps'] / t['rps']:.2f} × | {o['cpu_us'] / t['cpu_us']:.2f} × "
                     f"| {o['cmd_us'] / t['cmd_us']:.2f} × |")
    lines += [
        "",
        "## Redis's command work alone",
        "",
        "The same calls without Envoy or a service, on an idle Redis (redis-benchmark, 8 "
        "connections, 100 000 calls, INFO commandstats): what one request's decision costs "
        "inside Redis — one `RL.ALL` of n fixed-window groups (with `DEADLINE`) against n "
        "`INCRBY` + `EXPIRE` pairs.",
        "",
        "| descriptors | RL.ALL µs / request | INCRBY + EXPIRE µs / request | ratio |",
        "|---:|---:|---:|---:|",
    ]
    for n, (ours_us, theirs_us) in alone.items():
        lines.append(f"| {n} | {ours_us:.2f} | {theirs_us:.2f} | {ours_us / theirs_us:.2f} × |")
    lines += [
        "",
        "## Permits counted for refused requests",
        "",
        "Each request carries two descriptors: `small` (100 per hour) and `d2` (10^9 per hour), "
        f"3 s of `wrk -c{connections}`; after the run, `d2`'s counter against the requests "
        "admitted.",
        "",
        "| service | requests | admitted | refused | `d2` counted | counted for refused requests |",
        "|---|---:|---:|---:|---:|---:|",
    ]
    for which in ("ours", "theirs"):
        r = refusal[which]
        lines.append(f"| {names[which]} | {r['total']} | {r['admitted']} | {r['refused']} "
                     f"| {r['counted']} | {r['counted'] - r['admitted']} |")
    lines.append("")
    lines += kept_sections(args.out, [l for l in lines if l.startswith("## ")])
    with open(args.out, "w") as f:
        f.write("\n".join(lines))
    print("\n".join(lines))


if __name__ == "__main__":
    main()
