#!/usr/bin/env bash
# make bench-instr: instructions per call under callgrind, written to bench/INSTR.md.
#
# Installs valgrind when missing, builds redis-cell once (bench/redis-cell.sh), and runs
# bench/instr.py, which starts its own servers (the master under callgrind) in a temporary
# directory and stops them whatever happens.
#
# Environment:
#   MODULE       the module to measure (default: target/dist/libredis_ratelimit.so)
#   CELL_MODULE  redis-cell's module (default: built by bench/redis-cell.sh); BENCH_CELL=0
#                leaves its rows out
#   INSTR_OUT    where to write the tables (default: bench/INSTR.md)
#   INSTR_SERVERS name=binary,...: newer servers to measure the main rows on too (default:
#                Redis 8.x and Valkey 9.x of the matrix when present under target/servers —
#                `make servers` fetches them; empty: none)
#   INSTR_CALLS, INSTR_PIPELINE, INSTR_REPS, INSTR_KEEP   tuning, see bench/instr.py
set -euo pipefail

BENCH_DIR="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
ROOT="$(dirname "$BENCH_DIR")"
MODULE="${MODULE:-$ROOT/target/dist/libredis_ratelimit.so}"
export INSTR_OUT="${INSTR_OUT:-$BENCH_DIR/INSTR.md}"

die() {
  echo "bench-instr: $*" >&2
  exit 1
}

[[ -f "$MODULE" ]] || die "no module at $MODULE (run 'make build', or set MODULE=…)"
MODULE="$(cd "$(dirname "$MODULE")" && pwd)/$(basename "$MODULE")"
command -v redis-server >/dev/null 2>&1 || die "redis-server not found (make deps)"

missing=""
command -v valgrind >/dev/null 2>&1 || missing="$missing valgrind"
command -v python3 >/dev/null 2>&1 || missing="$missing python3-minimal"
if [[ -n "$missing" ]]; then
  echo "bench-instr: installing$missing" >&2
  sudo_cmd=()
  [[ "$(id -u)" -eq 0 ]] || sudo_cmd=(sudo)
  "${sudo_cmd[@]}" apt-get update -qq
  # shellcheck disable=SC2086
  DEBIAN_FRONTEND=noninteractive "${sudo_cmd[@]}" apt-get install -y -qq --no-install-recommends $missing
fi

if [[ "${BENCH_CELL:-1}" == 0 ]]; then
  CELL_MODULE=""
elif [[ -z "${CELL_MODULE:-}" ]]; then
  CELL_MODULE="$(bash "$BENCH_DIR/redis-cell.sh")" || die "redis-cell could not be built (BENCH_CELL=0 skips it)"
fi

if [[ -z "${INSTR_SERVERS+set}" ]]; then
  INSTR_SERVERS=""
  for bin in $(cd "$ROOT" && bash scripts/servers.sh bins 2>/dev/null); do
    case "$bin" in
      *redis-8.* | *valkey-9.*)
        [[ -x "$ROOT/$bin" ]] || continue
        INSTR_SERVERS="${INSTR_SERVERS:+$INSTR_SERVERS,}$(basename "$(dirname "$bin")")=$ROOT/$bin"
        ;;
    esac
  done
fi
export INSTR_SERVERS

WORK="$(mktemp -d "${TMPDIR:-/tmp}/redis-ratelimit-instr.XXXXXX")"
PY_PID=""
cleanup() {
  if [[ -n "$PY_PID" ]] && kill -0 "$PY_PID" 2>/dev/null; then
    kill -TERM "$PY_PID" 2>/dev/null || true
    wait "$PY_PID" 2>/dev/null || true
  fi
  rm -rf "$WORK"
}
trap cleanup EXIT
trap 'exit 130' INT
trap 'exit 143' TERM

export MODULE CELL_MODULE INSTR_WORK="$WORK"
# In the background + wait, so that a signal reaches the trap at once.
python3 "$BENCH_DIR/instr.py" &
PY_PID=$!
wait "$PY_PID"
