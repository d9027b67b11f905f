#!/usr/bin/env bash
# with-server.sh NAME PROGRAM [ARGS...]: a redis-server with the module on a free port (in a
# temporary directory, stopped whatever happens), then PROGRAM run from the package directory
# with RL_BENCH_PORT and RL_BENCH_PID set. Used by run.sh (make bench-clients-node) and
# blocks.sh (make bench-blocks); NAME is the make target, for messages.
set -euo pipefail
NAME=$1; shift
HERE=$(cd "$(dirname "$0")" && pwd)
ROOT=$(cd "$HERE/../../.." && pwd)
MODULE=${RL_MODULE:-$ROOT/target/release/libredis_ratelimit.so}
SERVER=${RL_SERVER:-redis-server}
[ -f "$MODULE" ] || { echo "$NAME: module $MODULE not built (make build)" >&2; exit 2; }
DIR=$(mktemp -d "/tmp/rl-$NAME.XXXXXX")
PORT=$(python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])')
"$SERVER" --port "$PORT" --bind 127.0.0.1 --save '' --appendonly no --daemonize yes --dir "$DIR" \
  --pidfile "$DIR/pid" --logfile "$DIR/log" --loadmodule "$MODULE"
cleanup() { [ -f "$DIR/pid" ] && kill "$(cat "$DIR/pid")" 2>/dev/null; sleep 0.2; rm -rf "$DIR"; }
trap cleanup EXIT
for _ in $(seq 100); do redis-cli -p "$PORT" ping >/dev/null 2>&1 && break; sleep 0.1; done
redis-cli -p "$PORT" ping >/dev/null || { cat "$DIR/log" >&2; exit 1; }
export RL_BENCH_PORT=$PORT RL_BENCH_PID
RL_BENCH_PID=$(cat "$DIR/pid")
cd "$HERE/.." && "$@"
