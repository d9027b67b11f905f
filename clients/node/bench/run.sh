#!/usr/bin/env bash
# make bench-clients-node: a redis-server with the module on a free port, then bench.js (six
# limiters behind one Express app under autocannon); writes bench/CLIENTS.md "## Node".
set -euo pipefail
HERE=$(cd "$(dirname "$0")" && pwd)
ROOT=$(cd "$HERE/../../.." && pwd)
exec bash "$HERE/with-server.sh" bench-clients-node \
  bash -c 'node bench/bench.js "$RL_BENCH_PORT" "$1"' _ "$ROOT/bench/CLIENTS.md"
