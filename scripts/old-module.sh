#!/usr/bin/env bash
# The module of an earlier release, built from this repository's history (tests/upgrade.rs
# loads it beside this build: RDB, AOF, DUMP and replication across the upgrade and back).
#
#   scripts/old-module.sh <commit> <dir>
#     <dir>/src/                       the commit's tree (git archive)
#     <dir>/target/                    its cargo target directory (one release build)
#     <dir>/libredis_ratelimit.so      the module; <dir>/built-from holds the full commit id
#
# Cached: a module built from the same commit is reused. Concurrent callers (several test
# binaries, one per server of make compat) are serialized on <dir>.lock. Prints the module's
# path. Exit status 3: the commit is not in this clone's history (a shallow clone; fetch the
# full history with `git fetch --unshallow`).
set -euo pipefail
COMMIT=${1:?commit}
DIR=${2:?output directory}
cd "$(dirname "$0")/.."
mkdir -p "$DIR"
exec 9>"$DIR.lock"
flock 9
MODULE=$DIR/libredis_ratelimit.so
if ! FULL=$(git rev-parse --verify --quiet "$COMMIT^{commit}"); then
  echo "old-module: commit $COMMIT is not in this clone's history (shallow clone?)" >&2
  exit 3
fi
if [ -f "$MODULE" ] && [ "$(cat "$DIR/built-from" 2>/dev/null)" = "$FULL" ]; then
  echo "$MODULE"
  exit 0
fi
rm -rf "$DIR/src" "$MODULE" "$DIR/built-from"
mkdir -p "$DIR/src"
git archive --format=tar "$FULL" | tar -x -C "$DIR/src"
# The old tree's own Cargo.lock pins what it was released with; its target directory is its
# own, so this build never touches the current one's artifacts.
"${CARGO:-cargo}" build --quiet --release --locked \
  --manifest-path "$DIR/src/Cargo.toml" --target-dir "$DIR/target" >&2
cp "$DIR/target/release/libredis_ratelimit.so" "$MODULE.tmp"
mv "$MODULE.tmp" "$MODULE"
echo "$FULL" > "$DIR/built-from"
echo "$MODULE"
