#!/usr/bin/env bash
# make node-compat: the host libraries' own, unmodified test suites (../shared/peers) through this
# package's adapters. Starts redis-server with the module on 6379 and a 3-master + 3-replica
# cluster on 7000-7005 (the ports the suites hardcode), installs the package into each suite's
# project as npm would (npm pack, unpacked into node_modules/redis-ratelimit), runs each suite's
# run.sh with its swap variable on a shim here, checks the counts, prints a summary, and tears
# the servers down (also on failure). Exit status: non-zero on any shortfall.
set -uo pipefail
HERE=$(cd "$(dirname "$0")" && pwd)
PKG=$(cd "$HERE/.." && pwd)
ROOT=$(cd "$PKG/../.." && pwd)
PEERS=${PEERS:-$ROOT/../shared/peers}
MODULE=${RL_MODULE:-$ROOT/target/release/libredis_ratelimit.so}
SERVER=${RL_SERVER:-redis-server}
WORK=${NODE_COMPAT_DIR:-$ROOT/target/node-compat}
RUNDIR=$(mktemp -d /tmp/rl-node-compat.XXXXXX)

if [ ! -d "$PEERS" ]; then echo "node-compat: no peer suites at $PEERS; skipped"; exit 0; fi
[ -f "$MODULE" ] || { echo "node-compat: module $MODULE not built (make build)" >&2; exit 2; }
MODULE=$(cd "$(dirname "$MODULE")" && pwd)/$(basename "$MODULE")

PORTS=(6379 7000 7001 7002 7003 7004 7005)
teardown() {
  for p in "${PORTS[@]}"; do
    if [ -f "$RUNDIR/$p.pid" ]; then
      pid=$(cat "$RUNDIR/$p.pid" 2>/dev/null)
      [ -n "$pid" ] && kill "$pid" 2>/dev/null
    fi
  done
  sleep 0.3
  rm -rf "$RUNDIR"
}
trap teardown EXIT

for p in "${PORTS[@]}"; do
  if redis-cli -p "$p" ping >/dev/null 2>&1; then
    echo "node-compat: port $p is already serving; the peer suites need it (stop that server first)" >&2
    exit 2
  fi
done

start() { # port [extra args]
  local p=$1; shift
  mkdir -p "$RUNDIR/$p"
  "$SERVER" --port "$p" --bind 127.0.0.1 --save '' --appendonly no --daemonize yes \
    --dir "$RUNDIR/$p" --pidfile "$RUNDIR/$p.pid" --logfile "$RUNDIR/$p/log" \
    --loadmodule "$MODULE" "$@"
}
wait_ping() { # port: up to 10 s
  for _ in $(seq 100); do redis-cli -p "$1" ping >/dev/null 2>&1 && return 0; sleep 0.1; done
  echo "node-compat: server on $1 did not start:" >&2; cat "$RUNDIR/$1/log" >&2; return 1
}

start 6379 || exit 1
for p in 7000 7001 7002 7003 7004 7005; do start "$p" --cluster-enabled yes --cluster-config-file nodes.conf || exit 1; done
for p in "${PORTS[@]}"; do wait_ping "$p" || exit 1; done
redis-cli --cluster create 127.0.0.1:7000 127.0.0.1:7001 127.0.0.1:7002 127.0.0.1:7003 \
  127.0.0.1:7004 127.0.0.1:7005 --cluster-replicas 1 --cluster-yes >"$RUNDIR/cluster-create.log" 2>&1 \
  || { cat "$RUNDIR/cluster-create.log" >&2; exit 1; }
ok=""
for _ in $(seq 200); do
  ok=1
  for p in 7000 7001 7002 7003 7004 7005; do
    redis-cli -p "$p" cluster info 2>/dev/null | grep -q 'cluster_state:ok' || ok=""
  done
  [ -n "$ok" ] && break
  sleep 0.1
done
[ -n "$ok" ] || { echo "node-compat: the cluster did not reach cluster_state:ok" >&2; exit 1; }
echo "node-compat: redis-server $("$SERVER" --version | sed -n 's/.*v=\([^ ]*\).*/\1/p') with $MODULE on 6379 and a 6-node cluster on 7000-7005"

# The package, as npm would install it.
mkdir -p "$WORK"
TARBALL=$(cd "$PKG" && npm pack --silent --pack-destination "$RUNDIR" 2>/dev/null | tail -1)
[ -f "$RUNDIR/$TARBALL" ] || { echo "node-compat: npm pack failed" >&2; exit 1; }

prepare() { # suite-dir scratch marker: the suite's pinned deps (as its run.sh installs them) + this package
  local suite=$1 scratch=$2 marker=$3
  mkdir -p "$scratch"
  cp "$PEERS/$suite/package.json" "$PEERS/$suite/package-lock.json" "$scratch/"
  if [ ! -d "$scratch/node_modules/$marker" ]; then
    (cd "$scratch" && npm install --no-audit --no-fund --loglevel=error) || return 1
  fi
  rm -rf "$scratch/node_modules/redis-ratelimit" && mkdir -p "$scratch/node_modules/redis-ratelimit"
  tar xzf "$RUNDIR/$TARBALL" -C "$scratch/node_modules/redis-ratelimit" --strip-components=1
}

stats() { # port...: module and Lua command calls since the last CONFIG RESETSTAT
  local p rl=0 lua=0 v
  for p in "$@"; do
    v=$(redis-cli -p "$p" info commandstats | tr -d '\r' | awk -F'[=:,]' '/^cmdstat_rl\./{s+=$3} END{print s+0}'); rl=$((rl + v))
    v=$(redis-cli -p "$p" info commandstats | tr -d '\r' | awk -F'[=:,]' '/^cmdstat_(eval|evalsha|eval_ro|evalsha_ro|fcall)[:]/{s+=$3} END{print s+0}'); lua=$((lua + v))
  done
  echo "$rl $lua"
}
resetstat() { local p; for p in "$@"; do redis-cli -p "$p" config resetstat >/dev/null; done; }

SUMMARY=()
FAILED=0

# 1. rate-limiter-flexible: 94 reported, >= 74 passing, failures only among the 20 raw-key / Lua tests.
S=$WORK/rlf
if prepare rate-limiter-flexible "$S" rate-limiter-flexible; then
  resetstat 6379
  RLF_IMPL="$HERE/rate-limiter-flexible.js" MOCHA_ARGS="--reporter json --reporter-option output=$RUNDIR/rlf.json" \
    bash "$PEERS/rate-limiter-flexible/run.sh" "$S" >"$RUNDIR/rlf.out" 2>"$RUNDIR/rlf.err"
  hook=$(grep -m1 'resolve-hook\] ../lib/RateLimiterRedis' "$RUNDIR/rlf.err")
  read -r rl lua <<<"$(stats 6379)"
  verdict=$(node "$HERE/check-rlf.js" "$RUNDIR/rlf.json" "$HERE/rlf-expected-failures.txt" 2>&1)
  st=$?
  echo "$verdict"
  echo "  swap: $hook"
  echo "  server: $rl module commands, $lua Lua calls (EVAL/EVALSHA/FCALL)"
  [ "$rl" -gt 0 ] && [ "$lua" -eq 0 ] || st=1
  SUMMARY+=("rate-limiter-flexible  $(echo "$verdict" | head -1)  module cmds $rl, Lua $lua")
  [ $st -eq 0 ] || FAILED=1
else
  SUMMARY+=("rate-limiter-flexible  install failed"); FAILED=1
fi

# 2. @nest-lab/throttler-storage-redis: 28/28, standalone and cluster.
S=$WORK/throttler-storage-redis
if prepare throttler-storage-redis "$S" @nest-lab/throttler-storage-redis; then
  resetstat 6379 7000 7001 7002 7003 7004 7005
  THROTTLER_STORAGE_IMPL="$HERE/throttler-storage-redis.js" JEST_ARGS="--json --outputFile=$RUNDIR/tsr.json" \
    bash "$PEERS/throttler-storage-redis/run.sh" "$S" >"$RUNDIR/tsr.out" 2>&1
  read -r rl lua <<<"$(stats 6379 7000 7001 7002 7003 7004 7005)"
  moved=0
  for p in 7000 7001 7002; do
    v=$(redis-cli -p "$p" info errorstats | tr -d '\r' | sed -n 's/^errorstat_MOVED:count=//p'); moved=$((moved + ${v:-0}))
  done
  verdict=$(node -e '
    const r = require(process.argv[1]);
    const ok = r.numTotalTests === 28 && r.numPassedTests === 28;
    console.log(`${r.numPassedTests} passed, ${r.numFailedTests} failed of ${r.numTotalTests} (need 28/28)`);
    for (const f of r.testResults) for (const a of f.assertionResults) if (a.status === "failed") console.log("  FAILED: " + a.fullName);
    process.exit(ok ? 0 : 1);' "$RUNDIR/tsr.json" 2>&1)
  st=$?
  echo "throttler-storage-redis: $verdict"
  echo "  swap: THROTTLER_STORAGE_IMPL=$HERE/throttler-storage-redis.js; server: $rl module commands, $lua Lua calls, $moved MOVED replies on the cluster"
  [ "$rl" -gt 0 ] && [ "$lua" -eq 0 ] || st=1
  [ $st -eq 0 ] || tail -40 "$RUNDIR/tsr.out"
  SUMMARY+=("throttler-storage-redis  $(echo "$verdict" | head -1)  module cmds $rl, Lua $lua, MOVED $moved")
  [ $st -eq 0 ] || FAILED=1
else
  SUMMARY+=("throttler-storage-redis  install failed"); FAILED=1
fi

# 3. express-rate-limit external store test, redis case: 1 passed.
S=$WORK/express-rate-limit
if prepare express-rate-limit "$S" rate-limit-redis; then
  resetstat 6379
  RATE_LIMIT_REDIS_IMPL="$HERE/express-rate-limit.cjs" JEST_ARGS="--json --outputFile=$RUNDIR/erl.json" \
    bash "$PEERS/express-rate-limit/run.sh" "$S" >"$RUNDIR/erl.out" 2>&1
  read -r rl lua <<<"$(stats 6379)"
  verdict=$(node -e '
    const r = require(process.argv[1]);
    const ok = r.numPassedTests === 1 && r.numFailedTests === 0;
    console.log(`${r.numPassedTests} passed, ${r.numFailedTests} failed, ${r.numPendingTests} skipped (need the redis case passed)`);
    process.exit(ok ? 0 : 1);' "$RUNDIR/erl.json" 2>&1)
  st=$?
  echo "express-rate-limit: $verdict"
  echo "  swap: RATE_LIMIT_REDIS_IMPL=$HERE/express-rate-limit.cjs; server: $rl module commands, $lua Lua calls"
  [ "$rl" -gt 0 ] && [ "$lua" -eq 0 ] || st=1
  [ $st -eq 0 ] || tail -40 "$RUNDIR/erl.out"
  SUMMARY+=("express-rate-limit  $(echo "$verdict" | head -1)  module cmds $rl, Lua $lua")
  [ $st -eq 0 ] || FAILED=1
else
  SUMMARY+=("express-rate-limit  install failed"); FAILED=1
fi

echo
echo "node-compat summary (the host libraries' own suites through clients/node):"
for line in "${SUMMARY[@]}"; do echo "  $line"; done
if [ $FAILED -ne 0 ]; then echo "node-compat: FAILED"; exit 1; fi
echo "node-compat: all three suites as required"
