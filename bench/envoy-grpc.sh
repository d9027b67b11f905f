#!/usr/bin/env bash
# bench/envoy-grpc.sh: issue 40's load shape on loopback, no Envoy — bench/envoy-grpc-load
# (grpc-go's client, one connection, -c callers, domain "bench", d1 = one of 10 000 users, the
# limit far away) straight to each service's gRPC port, both on one redis-server with the
# module loaded. Prints one line per service and caller count: requests/s, p50/p99, and what
# Redis spent per request (INFO cpu), the reads it made per request (INFO stats
# total_reads_processed: one read per batch of commands written together) and its commands.
#
# Needs the Envoy kit's build of envoyproxy/ratelimit (/work/shared/peers/README-envoy.md:
# fetch.sh puts their module in $RL_WORK/ratelimit and their binary in $RL_WORK/bin). The load
# client is built inside their module (it uses their dependencies) into $RL_WORK/bin.
#
# OURS (default target/release/redis-ratelimit), MODULE (target/release/libredis_ratelimit.so),
# THEIRS ($RL_WORK/bin/ratelimit), CALLERS ("1 32"), BENCH_SECONDS (5), SERVICES ("ours theirs");
# extra environment for each service: OURS_ENV / THEIRS_ENV ("K=V K=V"); KEEP=1 keeps the
# work directory (the services' logs).
set -euo pipefail
ROOT=$(cd "$(dirname "$0")/.." && pwd)
RL_WORK=${RL_WORK:-/tmp/envoy-ratelimit-kit}
OURS=${OURS:-$ROOT/target/release/redis-ratelimit}
MODULE=${MODULE:-$ROOT/target/release/libredis_ratelimit.so}
THEIRS=${THEIRS:-$RL_WORK/bin/ratelimit}
CALLERS=${CALLERS:-1 32}
SECONDS_EACH=${BENCH_SECONDS:-5}
SERVICES=${SERVICES:-ours theirs}
LOAD=$RL_WORK/bin/envoy-grpc-load
if [ ! -x "$LOAD" ]; then
  rm -rf "$RL_WORK/ratelimit/envoy-grpc-load"
  cp -r "$ROOT/bench/envoy-grpc-load" "$RL_WORK/ratelimit/"
  (cd "$RL_WORK/ratelimit" && go build -o "$LOAD" ./envoy-grpc-load)
fi
W=$(mktemp -d /tmp/envoy-grpc-bench.XXXXXX)
mkdir -p "$W/rt/rl/config"
cat > "$W/rt/rl/config/bench.yaml" <<'YAML'
domain: bench
descriptors:
  - key: d1
    rate_limit: {unit: hour, requests_per_unit: 1000000000}
YAML
free_port() { python3 -c "import socket;s=socket.socket();s.bind(('127.0.0.1',0));print(s.getsockname()[1])"; }
RP=$(free_port)
redis-server --port "$RP" --bind 127.0.0.1 --loadmodule "$MODULE" --save "" --appendonly no \
  > "$W/redis.log" 2>&1 &
RPID=$!
trap 'kill ${pid:-} $RPID 2>/dev/null; [ -n "${KEEP:-}" ] || rm -rf "$W"' EXIT
for _ in $(seq 50); do redis-cli -p "$RP" ping >/dev/null 2>&1 && break; sleep 0.1; done
info() { redis-cli -p "$RP" info "$1" | tr -d '\r'; }
cpu() { info cpu | awk -F: '/^used_cpu_(user|sys):/{s+=$2} END{printf "%.6f", s}'; }
reads() { info stats | awk -F: '/^total_reads_processed:/{print $2}'; }
calls() { info commandstats | awk -F'[=,]' '/^cmdstat_/ && !/cmdstat_(info|config|ping)/{s+=$2} END{print s+0}'; }
echo "# $(date -u +%FT%TZ) load average: $(cut -d' ' -f1-3 /proc/loadavg)"
for service in $SERVICES; do
  for c in $CALLERS; do
    G=$(free_port) H=$(free_port) D=$(free_port)
    if [ "$service" = ours ]; then cmd=("$OURS" envoy); extra=${OURS_ENV:-}; else cmd=("$THEIRS"); extra=${THEIRS_ENV:-}; fi
    # shellcheck disable=SC2086
    env -i PATH="$PATH" GRPC_HOST=127.0.0.1 GRPC_PORT="$G" HOST=127.0.0.1 PORT="$H" \
      DEBUG_HOST=127.0.0.1 DEBUG_PORT="$D" USE_STATSD=false RUNTIME_ROOT="$W/rt" \
      RUNTIME_SUBDIRECTORY=rl RUNTIME_WATCH_ROOT=false REDIS_SOCKET_TYPE=tcp \
      REDIS_URL="127.0.0.1:$RP" LOG_LEVEL=warn $extra "${cmd[@]}" > "$W/$service.log" 2>&1 &
    pid=$!
    for _ in $(seq 100); do curl -sf "http://127.0.0.1:$H/healthcheck" >/dev/null && break; sleep 0.1; done
    "$LOAD" -addr "127.0.0.1:$G" -c "$c" -d 1 >/dev/null # warm-up: connections, pages
    redis-cli -p "$RP" config resetstat >/dev/null
    cpu0=$(cpu) reads0=$(reads)
    out=$("$LOAD" -addr "127.0.0.1:$G" -c "$c" -d "$SECONDS_EACH")
    cpu1=$(cpu) reads1=$(reads) n_calls=$(calls)
    kill "$pid"; wait "$pid" 2>/dev/null || true
    python3 - "$service" "$c" "$out" "$cpu0" "$cpu1" "$reads0" "$reads1" "$n_calls" <<'PY'
import sys
service, c, out, cpu0, cpu1, r0, r1, calls = sys.argv[1:]
f = out.split()
n = int(f[1])
print(f"{service:6} callers {c:>2}: {f[5]:>6} req/s  p50 {f[7]} ms  p99 {f[10]} ms  errors {f[3]}  "
      f"Redis CPU {(float(cpu1) - float(cpu0)) * 1e6 / n:.1f} us/req  "
      f"reads/req {(int(r1) - int(r0)) / n:.3f}  commands/req {int(calls) / n:.2f}")
PY
  done
done
