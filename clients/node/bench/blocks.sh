#!/usr/bin/env bash
# make bench-blocks: a redis-server with the module on a free port, then blocks.js (one hot key,
# 8 processes of PermitBlock); writes bench/CLIENTS.md "## Permit blocks".
set -euo pipefail
HERE=$(cd "$(dirname "$0")" && pwd)
ROOT=$(cd "$HERE/../../.." && pwd)
exec bash "$HERE/with-server.sh" bench-blocks \
  bash -c 'node bench/blocks.js "$RL_BENCH_PORT" "$RL_BENCH_PID" "$1"' _ "$ROOT/bench/CLIENTS.md"
