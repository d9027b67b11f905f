#!/usr/bin/env bash
# The core's unsafe storage code (store::packed, the sliding log's buffer kept by a key alone)
# under two checkers:
#  1. Miri (nightly, installed with rustup when missing): the log buffer's two-owner round trip
#     (algorithms::slide::tests::a_log_kept_as_its_buffer_round_trips_with_one_owner_at_a_time)
#     under Stacked Borrows. store::packed's tests are NOT run under Miri: packed keeps pointers
#     in integer words (`as usize as *mut`), and Miri reports the boxes made again from those
#     words (Stacked and Tree Borrows alike: exposed provenance); valgrind checks them instead.
#  2. valgrind memcheck (installed with apt when missing) of every store:: test and the round
#     trip on the native build: invalid reads/writes, double frees, definite leaks fail.
# Run by make compat (scripts/memcheck.sh; about 3 minutes, most of it Miri's build).
set -euo pipefail
cd "$(dirname "$0")/.."
CARGO=${CARGO:-cargo}
SUDO=$([ "$(id -u)" = 0 ] || echo sudo)

if ! command -v valgrind >/dev/null 2>&1; then
  $SUDO apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq --no-install-recommends valgrind
fi

# Miri: the nightly toolchain's component (rustup, the ordinary client).
# A machine whose rustup cannot fetch a toolchain still runs the valgrind half (said loudly).
if ! $CARGO +nightly miri --version >/dev/null 2>&1; then
  rustup toolchain install nightly --profile minimal --component miri,rust-src || true
fi
if $CARGO +nightly miri --version >/dev/null 2>&1; then
  PROPTEST_CASES=4 $CARGO +nightly miri test -p ratelimit-core --target-dir target/miri -- \
    --exact algorithms::slide::tests::a_log_kept_as_its_buffer_round_trips_with_one_owner_at_a_time
  miri=Miri
else
  echo "memcheck: SKIPPED Miri: no nightly toolchain with miri could be installed here" >&2
  miri="(Miri skipped)"
fi

# valgrind: the unit-test binary of the core, built without running.
bin=$($CARGO test --release -p ratelimit-core --lib --no-run --message-format=json 2>/dev/null \
  | sed -n 's/.*"executable":"\([^"]*\)".*/\1/p' | tail -n1)
[ -x "$bin" ] || { echo "memcheck: no test binary for ratelimit-core" >&2; exit 1; }
PROPTEST_CASES=64 valgrind --error-exitcode=1 --leak-check=full --errors-for-leak-kinds=definite --show-possibly-lost=no -q \
  "$bin" store:: a_log_kept --test-threads=1
echo "memcheck: $miri (log buffer round trip) and valgrind (store::, log buffer) clean"
