#!/usr/bin/env bash
# make bench-blocks: a redis-server with the module on a free port, then blocks.js (one hot key,
# 8 processes of PermitBlock); writes bench/CLIENTS.md "## Permit blocks".
set -euo pipefail
HERE=$(cd "$(dirname "$0")" && pwd)
ROOT=$(cd "$HERE/../../.." && pwd)
MODULE=${RL_MODULE:-$ROOT/target/release/libredis_ratelimit.so}
SERVER=${RL_SERVER:-redis-server}
[ -f "$MODULE" ] || { echo "bench-blocks: module $MODULE not built (make build)" >&2; exit 2; }
DIR=$(mktemp -d /tmp/rl-node-blocks.XXXXXX)
PORT=$(python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])')
"$SERVER" --port "$PORT" --bind 127.0.0.1 --save '' --appendonly no --daemonize yes --dir "$DIR" \
  --pidfile "$DIR/pid" --logfile "$DIR/log" --loadmodule "$MODULE"
cleanup() { [ -f "$DIR/pid" ] && kill "$(cat "$DIR/pid")" 2>/dev/null; sleep 0.2; rm -rf "$DIR"; }
trap cleanup EXIT
for _ in $(seq 100); do redis-cli -p "$PORT" ping >/dev/null 2>&1 && break; sleep 0.1; done
redis-cli -p "$PORT" ping >/dev/null || { cat "$DIR/log" >&2; exit 1; }
cd "$HERE/.." && node bench/blocks.js "$PORT" "$(cat "$DIR/pid")" "$ROOT/bench/CLIENTS.md"
