#!/usr/bin/env bash
# make java-compat, second half: the Java host libraries' own suites, unedited, through the
# drop-ins (../shared/peers/README-java.md), each on its own server (RL_SERVER, default
# redis-server, with the module) on a free port, stopped by its pid even on failure:
#   Spring Cloud Gateway 5.0.3, the kit's main suite (RedisRateLimiter{,Config,DefaultFilterConfig,Unit}Tests):
#     no failure and no error, and the drop-in's bean is the one the tests got
#   Redisson 4.7.0 RedissonRateLimiterTest (31): every test passes but
#     - testRateValue: it reads the stock implementation's sorted set {test1}:permits;
#     - testConcurrency2: it counts client-side timestamps per window from the first up to and
#       including the first one 1000 ms later, and wants at most 18 of them at 18 per second:
#       19 whenever a limiter admits its full rate, as the drop-in's server-side waiters do (each
#       admitted the instant a permit frees); stock passes by the slack of its polling, and fails
#       it on a busy machine (the kit README);
#     testConcurrency also counts client-side timestamps: a failure of it is rerun alone once (the
#     kit README's advice) before it counts
# env: RL_MODULE, RL_SERVER, JAVA_JAR (make java-jar), PEERS (default ../shared/peers),
#      COMPAT_DIR (default target/clients-java-compat)
set -uo pipefail
ROOT=$(cd "$(dirname "$0")/../../.." && pwd)
PEERS=${PEERS:-$(cd "$ROOT/../shared/peers" 2>/dev/null && pwd)}
MODULE=${RL_MODULE:-$ROOT/target/release/libredis_ratelimit.so}
SERVER=${RL_SERVER:-redis-server}
DIR=${COMPAT_DIR:-$ROOT/target/clients-java-compat}
[ -d "$PEERS/spring-cloud-gateway" ] || { echo "java-compat: the kit is missing (expected ../shared/peers)" >&2; exit 1; }
[ -f "$MODULE" ] || { echo "java-compat: $MODULE is missing (make build)" >&2; exit 1; }
[ -f "${JAVA_JAR:-}" ] || { echo "java-compat: JAVA_JAR=${JAVA_JAR:-} is missing (make java-jar)" >&2; exit 1; }
mkdir -p "$DIR"
eval "$(JAVA_JAR=$JAVA_JAR bash "$(dirname "$0")/peer-env.sh")"

PIDS=()
cleanup() { for p in "${PIDS[@]}"; do kill "$p" 2>/dev/null; done; }
trap cleanup EXIT

# start_server NAME: a server with the module on a free port (startup deadline 10 s); sets PORT
start_server() {
  local name=$1 try
  for try in 1 2 3; do
    PORT=$(python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])')
    "$SERVER" --port "$PORT" --bind 127.0.0.1 --save '' --appendonly no --loadmodule "$MODULE" \
      >"$DIR/$name-server.log" 2>&1 &
    PIDS+=($!)
    local deadline=$((SECONDS + 10))
    while ((SECONDS < deadline)); do
      [[ "$(timeout 2 redis-cli -p "$PORT" ping 2>/dev/null)" == PONG ]] && return 0
      kill -0 "${PIDS[-1]}" 2>/dev/null || break
      sleep 0.1
    done
    kill "${PIDS[-1]}" 2>/dev/null
  done
  echo "java-compat: $SERVER did not start (log $DIR/$name-server.log)" >&2
  exit 1
}

summary=()
shortfall=0

echo "=== Spring Cloud Gateway 5.0.3 RedisRateLimiter tests (kit main suite) through the drop-in ==="
start_server scg
REDIS_PORT=$PORT bash "$PEERS/spring-cloud-gateway/run.sh" "$DIR/scg" 2>&1 | tee "$DIR/scg.log"
total=$(grep -E '^\[kit\] surefire-reports total' "$DIR/scg.log" | tail -1)
bean=$(grep -c 'redisRateLimiter=io.github.redisratelimit.scg.ModuleRedisRateLimiter' "$DIR/scg.log")
summary+=("SCG main: ${total#*total: } (expected: 0 failures, 0 errors; drop-in bean seen in $bean context(s))")
if ! grep -qE 'Tests run: [1-9][0-9]*, Failures: 0, Errors: 0' <<<"$total" || [ "$bean" = 0 ]; then
  shortfall=1; summary+=("  SHORTFALL: log $DIR/scg.log")
fi

echo "=== Redisson 4.7.0 RedissonRateLimiterTest through the drop-in ==="
start_server redisson
redisson_run() { # FILTER LOG
  REDIS_PORT=$PORT TEST_FILTER=$1 bash "$PEERS/redisson/run.sh" "$DIR/redisson" >"$2" 2>&1
  # the failed tests' names, from Surefire's console lines ("...Test.name -- Time elapsed: ... <<< FAILURE!")
  grep -oE 'RedissonRateLimiterTest\.[A-Za-z0-9_]+ -- Time elapsed: .* <<< (FAILURE|ERROR)!' "$2" \
    | sed -E 's/^RedissonRateLimiterTest\.([A-Za-z0-9_]+) .*/\1/' | sort -u
}
failed=$(redisson_run RedissonRateLimiterTest "$DIR/redisson.log")
grep -E '^\[kit\]|Tests run:' "$DIR/redisson.log" | tail -4
unexpected=""
for t in $failed; do
  case $t in
    testRateValue|testConcurrency2) ;;
    testConcurrency)
      again=$(redisson_run "RedissonRateLimiterTest#$t" "$DIR/redisson-$t.log")
      [ -z "$again" ] || unexpected="$unexpected $t" ;;
    *) unexpected="$unexpected $t" ;;
  esac
done
summary+=("Redisson: failed: $(echo ${failed:-none}) (allowed: testRateValue, testConcurrency2; testConcurrency rerun alone)")
if [ -n "$unexpected" ] || ! grep -q 'Tests run: 31' "$DIR/redisson.log"; then
  shortfall=1; summary+=("  SHORTFALL:${unexpected:- not 31 tests run}; log $DIR/redisson.log")
fi

echo "=== java-compat summary ==="
printf '%s\n' "${summary[@]}"
exit $shortfall
