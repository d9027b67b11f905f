#!/usr/bin/env bash
# make envoy-peer: envoyproxy/ratelimit's own integration and config tests against
# `redis-ratelimit envoy`, through the kit in ../shared/peers/envoy-ratelimit (its
# README-envoy.md): their test binary and test bodies, our service started with each test's
# settings as environment variables, the module loaded into every redis-server they start.
#   1. fetch.sh: their module from the Go module proxy (pinned, hash-checked), built once into
#      $RL_WORK (target/envoy-peer); skipped when that build is there for the kit's pin.
#   2. run-suite.sh dropin with every setting passed (RL_EXTERNAL_ENV_ALL=1, so
#      STOP_CACHE_KEY_INCREMENT_WHEN_OVERLIMIT=false, their counting): all pass but
#      TestBasicConfig_ExtraTags (a harness limit: their binary fails it too).
#   3. run-suite.sh dropin with our defaults (a refused request counts nothing): only the
#      kit's allow-never-counts.txt assertions may fail.
#   4. configcheck.sh dropin: their config cases accepted and refused as theirs are.
# Runs 2 and 3 also run their TLS and Sentinel tests (10 more): scripts/envoy-peer-extras.sh
# brings up TLS Redis on 7831-7833 and Sentinels on 7841-7846 around each run.
# The kit uses the fixed ports 7800-7899: every run holds /tmp/envoy-kit.lock.
set -euo pipefail
ROOT=$(cd "$(dirname "$0")/.." && pwd)
KIT=${ENVOY_KIT:-${PEERS:-$ROOT/../shared/peers}/envoy-ratelimit}
[ -x "$KIT/run-suite.sh" ] || { echo "envoy-peer: no kit at $KIT (set ENVOY_KIT)" >&2; exit 1; }
KIT=$(cd "$KIT" && pwd)
export RL_WORK=${RL_WORK:-$ROOT/target/envoy-peer}
export RL_EXTERNAL_CMD="${ENVOY_PEER_CLI:-$ROOT/target/release/redis-ratelimit} envoy"
export REDIS_LOADMODULE=${ENVOY_PEER_MODULE:-$ROOT/target/release/libredis_ratelimit.so}
for f in "${RL_EXTERNAL_CMD% envoy}" "$REDIS_LOADMODULE"; do
  [ -e "$f" ] || { echo "envoy-peer: $f is missing (build it first)" >&2; exit 1; }
done
HARNESS_LIMIT=TestBasicConfig_ExtraTags
lock() { flock /tmp/envoy-kit.lock "$@"; }
start=$(date +%s)
pin=$(sed -n 's/^RL_MODULE_SUM=\([^ ]*\).*/\1/p' "$KIT/env.sh")
if [ -x "$RL_WORK/integration.test" ] && grep -qF "$pin" "$RL_WORK/VERSION" 2>/dev/null; then
  echo "== envoy-peer: their build in $RL_WORK is the kit's pin; not fetched again"
else
  mkdir -p "$RL_WORK"
  bash "$KIT/fetch.sh" "$RL_WORK"
fi
echo "== envoy-peer: every setting passed (their counting)"
ALLOW_FAIL="$HARNESS_LIMIT" RL_EXTERNAL_ENV_ALL=1 \
  lock bash "$ROOT/scripts/envoy-peer-extras.sh" run bash "$KIT/run-suite.sh" dropin "$RL_WORK/results/dropin-all"
echo "== envoy-peer: our defaults (a refused request counts nothing)"
ALLOW_FAIL="$(cat "$KIT/allow-never-counts.txt") $HARNESS_LIMIT" \
  lock bash "$ROOT/scripts/envoy-peer-extras.sh" run bash "$KIT/run-suite.sh" dropin "$RL_WORK/results/dropin-defaults"
echo "== envoy-peer: their config cases"
lock bash "$KIT/configcheck.sh" dropin "$RL_WORK/results/config-dropin"
echo "== envoy-peer: ok in $(( $(date +%s) - start )) s"
