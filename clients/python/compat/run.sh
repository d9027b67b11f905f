#!/usr/bin/env bash
# make python-compat: limits 5.8.0's and Flask-Limiter 4.1.1's own test suites, unedited, with the
# redis:// and async+redis:// schemes swapped to this package's storages (../shared/peers, see
# README-python.md there), against servers that load the module. Checks the expected counts:
#   limits   -m "redis and not benchmark", ASYNC_REDIS_IMPLEMENTATION=coredis, then redispy:
#            every test passes except the two test_custom_prefix tests (they GET the counter
#            key raw: a module key answers WRONGTYPE)
#   Flask-Limiter, the whole suite -k "not mongodb": 127 passed, 1 xpassed (as stock)
# Prints a summary; the peers' scripts stop their servers even on failure; exits non-zero on
# any shortfall.
#
# env: RL_MODULE (default target/release/libredis_ratelimit.so), PEERS (default ../shared/peers),
#      COMPAT_DIR (default target/clients-python-compat), PYTHON (default python3)
set -uo pipefail

ROOT=$(cd "$(dirname "$0")/../../.." && pwd)
PEERS=${PEERS:-$(cd "$ROOT/../shared/peers" 2>/dev/null && pwd)}
MODULE=${RL_MODULE:-$ROOT/target/release/libredis_ratelimit.so}
DIR=${COMPAT_DIR:-$ROOT/target/clients-python-compat}
export PYTHON=${PYTHON:-python3}
[ -d "$PEERS/limits" ] || { echo "python-compat: the peers' suites are missing (expected ../shared/peers)" >&2; exit 1; }
[ -f "$MODULE" ] || { echo "python-compat: $MODULE is missing (make build)" >&2; exit 1; }
mkdir -p "$DIR"

# the module loaded with no arguments (limits' million-per-2-s moving window logs at most 2 000
# entries, within ratelimit.slide-log-max's default)
export REDIS_EXTRA_ARGS="--loadmodule $(cd "$(dirname "$MODULE")" && pwd)/$(basename "$MODULE")"
export PYTHONPATH="$ROOT/clients/python/src"
export LIMITS_SWAP_SYNC=redis_ratelimit.limits:ModuleStorage
export LIMITS_SWAP_ASYNC=redis_ratelimit.limits:AsyncModuleStorage
unset CI_DELAY
[ "${CI:-}" = "True" ] && export CI=true # limits' conftest sleeps 10 s per fixture on CI=True

summary=()
shortfall=0

# counts LOG: "passed failed xpassed errors" from pytest's last summary line
counts() {
  local line
  line=$(grep -E '^=+ .*(passed|failed|error).* in [0-9.]+s' "$1" | tail -1)
  for what in passed failed xpassed error; do
    echo "$line" | grep -oE "[0-9]+ $what" | grep -oE '^[0-9]+' || echo 0
  done | paste -sd' '
}

limits_run() { # implementation
  local impl=$1 work=$DIR/limits-$1
  echo "=== limits 5.8.0, -m \"redis and not benchmark\", ASYNC_REDIS_IMPLEMENTATION=$impl, swapped ==="
  WORK=$work VENV=$DIR/limits-venv ASYNC_REDIS_IMPLEMENTATION=$impl \
    bash "$PEERS/limits/run-limits-tests.sh" swap
  local log=$work/swap.log
  read -r passed failed xpassed errors < <(counts "$log")
  local unexpected
  unexpected=$(grep -E '^(FAILED|ERROR) ' "$log" | grep -v 'test_custom_prefix' || true)
  summary+=("limits ($impl): $passed passed, $failed failed (expected: 79 passed, 2 failed = the two test_custom_prefix)")
  if [ "$passed" != 79 ] || [ "$failed" != 2 ] || [ "$errors" != 0 ] || [ -n "$unexpected" ]; then
    shortfall=1
    summary+=("  SHORTFALL; unexpected: ${unexpected:-none}; log $log")
  fi
}

flask_run() {
  local work=$DIR/flask-limiter
  if ! command -v memcached >/dev/null 2>&1; then
    SUDO=$([ "$(id -u)" = 0 ] || echo sudo)
    $SUDO apt-get update -qq && DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq --no-install-recommends memcached
  fi
  echo "=== Flask-Limiter 4.1.1, -k \"not mongodb\", swapped ==="
  WORK=$work VENV=$DIR/flask-limiter-venv SELECT="not mongodb" \
    bash "$PEERS/limits/run-flask-limiter-tests.sh" swap
  read -r passed failed xpassed errors < <(counts "$work/swap.log")
  summary+=("Flask-Limiter: $passed passed, $failed failed, $xpassed xpassed (expected: 127 passed, 1 xpassed)")
  if [ "$passed" != 127 ] || [ "$failed" != 0 ] || [ "$xpassed" != 1 ] || [ "$errors" != 0 ]; then
    shortfall=1
    summary+=("  SHORTFALL; log $work/swap.log")
  fi
}

for step in ${COMPAT_STEPS:-coredis redispy flask}; do
  case $step in
    coredis | redispy) limits_run "$step" ;;
    flask) flask_run ;;
  esac
done

echo "=== python-compat summary ==="
printf '%s\n' "${summary[@]}"
if [ $shortfall = 0 ]; then echo "python-compat: OK"; else echo "python-compat: SHORTFALL"; fi
exit $shortfall
