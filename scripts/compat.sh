#!/usr/bin/env bash
# make compat: the compatibility matrix (README "Servers").
#
# Builds Redis 7.4.1 and Valkey 8.0.1 from the release sources in ../shared/servers (relative to
# the repository root; override with SERVERS_SRC), cached under target/servers/<name>/ (rebuilt
# only when the binary is missing), then runs every integration test file against each server
# (RL_SERVER / RL_CLI point the test harness at its binaries) and prints a matrix:
# server × test file, with passed/total tests per file and the time each server's run took.
# Exits non-zero if any test failed; exits 0 with a skip message when the sources are absent.
#
# COMPAT_SERVERS="redis-7.4.1 valkey-8.0.1" chooses servers (add "system" for the redis-server
# on PATH); COMPAT_TESTS="token cluster" restricts the test files.
set -uo pipefail
cd "$(dirname "$0")/.."
ROOT=$(pwd)
SRC=${SERVERS_SRC:-$ROOT/../shared/servers}
CARGO=${CARGO:-cargo}
SERVERS=${COMPAT_SERVERS:-redis-7.4.1 valkey-8.0.1}
OUT=$ROOT/target/servers

if [ ! -d "$SRC" ]; then
  echo "make compat: SKIPPED — no server sources at $SRC (expected redis-7.4.1.tar.gz and"
  echo "valkey-8.0.1.tar.gz there; set SERVERS_SRC to another folder). Nothing was tested."
  exit 0
fi

# The load test holds 1000 connections (same as make integration).
ulimit -n 8192 2>/dev/null || ulimit -n "$(ulimit -Hn)" 2>/dev/null || true

# binaries <name>: sets SERVER_BIN and CLI_BIN, building the server when its binary is missing.
binaries() {
  local name=$1 prog
  if [ "$name" = system ]; then
    SERVER_BIN=$(command -v redis-server); CLI_BIN=$(command -v redis-cli); return 0
  fi
  case $name in valkey-*) prog=valkey ;; *) prog=redis ;; esac
  SERVER_BIN=$OUT/$name/src/$prog-server
  CLI_BIN=$OUT/$name/src/$prog-cli
  if [ -x "$SERVER_BIN" ] && [ -x "$CLI_BIN" ]; then return 0; fi
  local tarball=$SRC/$name.tar.gz
  if [ ! -f "$tarball" ]; then
    echo "make compat: no $tarball" >&2; return 1
  fi
  echo "== building $name from $tarball (make -j2 BUILD_TLS=no; about a minute)"
  rm -rf "${OUT:?}/$name" && mkdir -p "$OUT" && tar xzf "$tarball" -C "$OUT" || return 1
  local t0=$SECONDS
  if ! make -C "$OUT/$name" -j2 BUILD_TLS=no >"$OUT/$name.build.log" 2>&1; then
    tail -30 "$OUT/$name.build.log" >&2; echo "make compat: building $name failed" >&2; return 1
  fi
  echo "   built in $((SECONDS - t0)) s: $SERVER_BIN"
}

if [ -n "${COMPAT_TESTS:-}" ]; then
  TESTS=$COMPAT_TESTS
else
  TESTS=$(ls tests/*.rs | xargs -n1 basename | sed 's/\.rs$//' | tr '\n' ' ')
fi

echo "== building the module and the integration tests"
$CARGO test --test '*' --no-run >/dev/null || { echo "make compat: build failed" >&2; exit 1; }

declare -A RESULT
declare -A ELAPSED
declare -A VERSION
status=0
for name in $SERVERS; do
  if ! binaries "$name"; then
    for t in $TESTS; do RESULT[$name,$t]="no server"; done; status=1; continue
  fi
  VERSION[$name]=$("$SERVER_BIN" --version | head -1 | sed 's/ sha=.*//')
  echo "== $name: ${VERSION[$name]}"
  mkdir -p "$OUT/logs/$name"
  t0=$SECONDS
  for t in $TESTS; do
    log=$OUT/logs/$name/$t.log
    RL_SERVER=$SERVER_BIN RL_CLI=$CLI_BIN $CARGO test --test "$t" >"$log" 2>&1
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
    case ${RESULT[$name,$t]} in *FAIL*|"no server") ;; *) n=$((n + 1)) ;; esac
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
