#!/usr/bin/env bash
# fuzz/run.sh TARGET SECONDS — build one libFuzzer target on the stable toolchain as
# `cargo fuzz build` would (sanitizer-coverage instrumentation, `--cfg fuzzing`, debug
# assertions and overflow checks, release profile, fuzz/target), then fuzz it for SECONDS
# seconds (`-seed=1`) over a fresh temporary corpus plus the committed seeds in
# fuzz/seeds/TARGET (read only: libFuzzer writes new inputs to the first corpus dir only).
# Exits non-zero on a crash, printing the reproducer's path (under fuzz/artifacts/TARGET/).
# Reproduce: fuzz/target/<host>/release/TARGET <artifact>. FUZZ_ARGS adds libFuzzer flags.
set -euo pipefail

if [ $# -ne 2 ] || ! [[ $2 =~ ^[0-9]+$ ]]; then
  targets=$(sed -n 's/^name = "\(.*\)"$/\1/p' "$(dirname "$0")/Cargo.toml" | tail -n +2 \
    | paste -sd ' ')
  echo "usage: $0 TARGET SECONDS   (targets: $targets)" >&2
  exit 2
fi
target=$1
secs=$2
root=$(cd "$(dirname "$0")/.." && pwd)
cd "$root"
[ -f "fuzz/fuzz_targets/$target.rs" ] || { echo "no fuzz target '$target'" >&2; exit 2; }

# The flags of `cargo fuzz build --sanitizer none --strip-dead-code` (cargo-fuzz 0.12/0.13 on
# Linux; its default sanitizer, ASan, needs nightly): sancov instrumentation with inline 8-bit
# counters, PC table, compare tracing and stack depth; `--cfg fuzzing`; debug assertions and
# overflow checks; one codegen unit; release profile with debug info. Without
# `-Clink-dead-code` (cargo-fuzz's default) the binary has ~2 900 counters instead of ~135 000
# (all of redis-module), which libFuzzer scans on every run: 3x the executions per second.
# An explicit --target keeps RUSTFLAGS off build scripts and proc macros (bindgen), which
# must not be instrumented.
host=$(rustc -vV | sed -n 's/^host: //p')
export RUSTFLAGS="-Cpasses=sancov-module \
-Cllvm-args=-sanitizer-coverage-level=4 \
-Cllvm-args=-sanitizer-coverage-inline-8bit-counters \
-Cllvm-args=-sanitizer-coverage-pc-table \
-Cllvm-args=-sanitizer-coverage-trace-compares \
-Cllvm-args=-simplifycfg-branch-fold-threshold=0 \
--cfg fuzzing \
-Cllvm-args=-sanitizer-coverage-stack-depth \
-Cdebug-assertions -Coverflow-checks -Ccodegen-units=1 ${RUSTFLAGS:-}"
"${CARGO:-cargo}" build --manifest-path fuzz/Cargo.toml --target "$host" --release \
  --config profile.release.debug=true --target-dir fuzz/target --bin "$target"
bin="fuzz/target/$host/release/$target"

corpus=$(mktemp -d "${TMPDIR:-/tmp}/fuzz-$target.XXXXXX")
log="$corpus.log"
trap 'rm -rf "$corpus" "$log"' EXIT
artifacts="fuzz/artifacts/$target"
mkdir -p "$artifacts"

# The full log stays in $log; the terminal gets it without the per-input NEW/REDUCE lines.
set +e
# shellcheck disable=SC2086 # FUZZ_ARGS is a list of flags
"$bin" "$corpus" "fuzz/seeds/$target" -max_total_time="$secs" -seed=1 \
  -artifact_prefix="$artifacts/" -print_final_stats=1 ${FUZZ_ARGS:-} 2>&1 | tee "$log" \
  | grep --line-buffered -vE '^#[0-9]+[[:space:]]+(NEW|REDUCE) '
status=${PIPESTATUS[0]}
set -e

if [ "$status" -ne 0 ]; then
  echo "fuzz/$target: CRASH (libFuzzer exit $status)" >&2
  sed -n 's/.*Test unit written to \(.*\)$/fuzz\/'"$target"': reproducer: \1/p' "$log" >&2
  exit "$status"
fi
# An uninstrumented build would "pass" while exploring nothing.
counters=$(sed -n 's/^INFO: Loaded [0-9]* modules *(\([0-9]*\) inline 8-bit counters).*/\1/p' \
  "$log" | head -1)
if [ "${counters:-0}" -eq 0 ]; then
  echo "fuzz/$target: the binary has no coverage counters: not instrumented" >&2
  exit 1
fi
last=$(grep -E '^#[0-9]+' "$log" | tail -1)
execs=$(sed -n 's/^stat::number_of_executed_units: *//p' "$log")
rate=$(sed -n 's/^stat::average_exec_per_sec: *//p' "$log")
echo "fuzz/$target: OK in ${secs}s: $execs runs, $rate exec/s, $counters counters in the binary"
echo "fuzz/$target: final: $last"
