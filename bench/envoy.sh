#!/usr/bin/env bash
# make bench-envoy: redis-ratelimit envoy against envoyproxy/ratelimit, both behind the same
# Envoy 1.40, on the same Redis (with the module loaded), configured by the same environment
# variables and the same config file; one load generator (wrk). Writes bench/ENVOY.md.
#
# envoyproxy/ratelimit is built here from its Go module (the module proxy, pinned pseudo-version
# below) into target/bench-envoy/bin — never committed. BENCH_SECONDS (default 8) per run,
# BENCH_CONNECTIONS (default 32: issue 40's 32 concurrent callers, each a wrk connection) connections.
set -euo pipefail
ROOT=$(cd "$(dirname "$0")/.." && pwd)
cd "$ROOT"
RATELIMIT_MODULE=github.com/envoyproxy/ratelimit
RATELIMIT_VERSION=v1.4.1-0.20260122083618-3fb702589d36
OUT=$ROOT/target/bench-envoy
mkdir -p "$OUT/bin"
if ! command -v wrk >/dev/null 2>&1; then
  SUDO=$( [ "$(id -u)" = 0 ] || echo sudo ) bash scripts/apt-install.sh wrk
fi
ENVOY=$(bash scripts/envoy.sh)
if [ ! -x "$OUT/bin/service_cmd" ]; then
  echo "== building envoyproxy/ratelimit $RATELIMIT_VERSION (go install, module proxy)" >&2
  GOBIN=$OUT/bin go install "$RATELIMIT_MODULE/src/service_cmd@$RATELIMIT_VERSION"
fi
exec python3 bench/envoy.py --envoy "$ENVOY" --theirs "$OUT/bin/service_cmd" \
  --ours "$ROOT/target/dist/redis-ratelimit" --module "$ROOT/target/dist/libredis_ratelimit.so" \
  --theirs-version "$RATELIMIT_VERSION" --work "$OUT" --out "$ROOT/bench/ENVOY.md"
