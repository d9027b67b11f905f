#!/usr/bin/env bash
# make bench: the performance table of SPEC §5, printed and written to bench/RESULTS.md.
#
# Starts a private redis-server (127.0.0.1, a free port, a temporary directory, no
# persistence) with the module loaded, pins it and the benchmark client to different CPUs
# when there are at least two and taskset exists, runs bench/bench.py (the measurements;
# Python 3 standard library only), and stops the server whatever happens.
#
# Environment:
#   MODULE    the module to load (default: target/dist/libredis_ratelimit.so of this repo)
#   RESULTS   where to write the table (default: bench/RESULTS.md)
#   BENCH_REPS, BENCH_N_P1, BENCH_N_P16, BENCH_CLIENTS, BENCH_KEYSPACE, BENCH_MEM_KEYS,
#   BENCH_SLIDE_ENTRIES   tuning, see bench/bench.py
#   CELL_MODULE   redis-cell's module for the side-by-side comparison (default: built once by
#                 bench/redis-cell.sh into target/redis-cell/); BENCH_CELL=0 skips it
#   BENCH_ONLY    "cell": only the redis-cell comparison, replacing its section of RESULTS;
#                 "features": only bench/waiters.py (RL.ALL, BAN, WAIT, leases: server time, and
#                 latency with 10,000 waiting clients), replacing its section of RESULTS
#   WAITERS, WAIT_KEYS, PROBE_SECONDS, FEAT_OPS, FEAT_REPS   tuning, see bench/waiters.py
set -euo pipefail

# 10,000 waiting clients (bench/waiters.py) need as many descriptors, here and in the server.
ulimit -n 65536 2>/dev/null || ulimit -n "$(ulimit -Hn)" 2>/dev/null || true

BENCH_DIR="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
ROOT="$(dirname "$BENCH_DIR")"
MODULE="${MODULE:-$ROOT/target/dist/libredis_ratelimit.so}"
RESULTS="${RESULTS:-$BENCH_DIR/RESULTS.md}"

die() {
  echo "bench: $*" >&2
  exit 1
}

[[ -f "$MODULE" ]] || die "no module at $MODULE (run 'make build', or set MODULE=…)"
MODULE="$(cd "$(dirname "$MODULE")" && pwd)/$(basename "$MODULE")"
for tool in redis-server redis-benchmark; do
  command -v "$tool" >/dev/null 2>&1 || die "$tool not found (apt-get install redis-server redis-tools)"
done

# Python 3 drives the runs; a fresh Debian machine may lack it.
if ! command -v python3 >/dev/null 2>&1; then
  echo "bench: installing python3-minimal" >&2
  sudo_cmd=()
  [[ "$(id -u)" -eq 0 ]] || sudo_cmd=(sudo)
  "${sudo_cmd[@]}" apt-get update -qq
  DEBIAN_FRONTEND=noninteractive "${sudo_cmd[@]}" apt-get install -y -qq --no-install-recommends python3-minimal
fi

# redis-cell, the module CL.THROTTLE comes from, for the side-by-side comparison: built once.
CELL_SKIPPED=""
if [[ "${BENCH_ONLY:-}" == features ]]; then
  CELL_MODULE=""
  CELL_SKIPPED="BENCH_ONLY=features"
elif [[ "${BENCH_CELL:-1}" == 0 ]]; then
  CELL_MODULE=""
  CELL_SKIPPED="BENCH_CELL=0"
elif [[ -z "${CELL_MODULE:-}" ]]; then
  if ! CELL_MODULE="$(bash "$BENCH_DIR/redis-cell.sh")"; then
    CELL_MODULE=""
    CELL_SKIPPED="redis-cell could not be built (bench/redis-cell.sh)"
    echo "bench: $CELL_SKIPPED; the comparison is skipped" >&2
  fi
fi
if [[ -n "$CELL_MODULE" ]]; then
  [[ -f "$CELL_MODULE" ]] || die "no redis-cell module at $CELL_MODULE"
  CELL_MODULE="$(cd "$(dirname "$CELL_MODULE")" && pwd)/$(basename "$CELL_MODULE")"
fi
[[ "${BENCH_ONLY:-}" != cell || -n "$CELL_MODULE" ]] || die "BENCH_ONLY=cell without redis-cell"

# Pin the server to CPU 0 and the client side (Python and the redis-benchmark it runs) to
# CPU 1, when possible.
NPROC="$(nproc)"
server_cpu=()
client_cpu=()
if [[ "$NPROC" -ge 2 ]] && command -v taskset >/dev/null 2>&1; then
  server_cpu=(taskset -c 0)
  client_cpu=(taskset -c 1)
else
  echo "bench: not pinning (needs taskset and 2 CPUs)" >&2
fi

WORK="$(mktemp -d "${TMPDIR:-/tmp}/redis-ratelimit-bench.XXXXXX")"
SERVER_PID=""
BENCH_PID=""

# Stops the measurements (Python kills the redis-benchmark it runs), then the server
# (politely, then for sure), and removes the temporary directory.
cleanup() {
  if [[ -n "$BENCH_PID" ]] && kill -0 "$BENCH_PID" 2>/dev/null; then
    kill -TERM "$BENCH_PID" 2>/dev/null || true
    wait "$BENCH_PID" 2>/dev/null || true
  fi
  if [[ -n "$SERVER_PID" ]] && kill -0 "$SERVER_PID" 2>/dev/null; then
    kill -TERM "$SERVER_PID" 2>/dev/null || true
    for _ in $(seq 50); do
      kill -0 "$SERVER_PID" 2>/dev/null || break
      sleep 0.1
    done
    kill -KILL "$SERVER_PID" 2>/dev/null || true
    wait "$SERVER_PID" 2>/dev/null || true
  fi
  rm -rf "$WORK"
}
trap cleanup EXIT
trap 'exit 130' INT
trap 'exit 143' TERM

# A free loopback port: ask the kernel for one, then start the server on it; retry if another
# process took it in between.
free_port() {
  python3 -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])'
}

start_server() {
  local port="$1"
  "${server_cpu[@]}" redis-server \
    --bind 127.0.0.1 --port "$port" --protected-mode yes \
    --dir "$WORK" --logfile "$WORK/redis.log" --daemonize no \
    --save "" --appendonly no \
    --loadmodule "$MODULE" &
  SERVER_PID=$!
  for _ in $(seq 100); do
    if redis-cli -h 127.0.0.1 -p "$port" PING 2>/dev/null | grep -q PONG; then
      return 0
    fi
    kill -0 "$SERVER_PID" 2>/dev/null || break
    sleep 0.1
  done
  kill -KILL "$SERVER_PID" 2>/dev/null || true
  wait "$SERVER_PID" 2>/dev/null || true
  SERVER_PID=""
  return 1
}

PORT=""
for _ in 1 2 3; do
  candidate="$(free_port)"
  if start_server "$candidate"; then
    PORT="$candidate"
    break
  fi
done
if [[ -z "$PORT" ]]; then
  cat "$WORK/redis.log" >&2 || true
  die "redis-server did not start"
fi
echo "bench: redis-server pid $SERVER_PID on 127.0.0.1:$PORT, module $MODULE" >&2

# The measurements; the table goes to stdout and to $RESULTS.
export REDIS_HOST=127.0.0.1 REDIS_PORT="$PORT" MODULE RESULTS BENCH_DIR
export CLIENT_CPU="${client_cpu[*]}" SERVER_CPU="${server_cpu[*]}" MACHINE_NPROC="$NPROC"
export CELL_MODULE CELL_SKIPPED BENCH_WORK="$WORK" BENCH_ONLY="${BENCH_ONLY:-}"
# In the background + wait, so that a signal reaches the trap at once.
if [[ "${BENCH_ONLY:-}" != features ]]; then
  "${client_cpu[@]}" python3 "$BENCH_DIR/bench.py" &
  BENCH_PID=$!
  wait "$BENCH_PID"
fi
# The feature section (its own server), after the main table or alone.
if [[ -z "${BENCH_ONLY:-}" || "${BENCH_ONLY:-}" == features ]]; then
  "${client_cpu[@]}" python3 "$BENCH_DIR/waiters.py" &
  BENCH_PID=$!
  wait "$BENCH_PID"
fi
