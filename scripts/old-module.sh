#!/usr/bin/env bash
# The module of an earlier release, built from this repository's history (tests/upgrade.rs
# loads it beside this build: RDB, AOF, DUMP and replication across the upgrade and back).
#
#   scripts/old-module.sh <commit> <dir>
#     <dir>/libredis_ratelimit.so      the module; <dir>/built-from holds the full commit id
#
# Built once per machine, keyed by the commit: the build lives in $RL_CACHE/old-modules/<commit>/
# (RL_CACHE defaults to ${XDG_CACHE_HOME:-~/.cache}/redis-ratelimit), so a fresh clone, another
# worktree or CI on the same machine copies it instead of building it again. Every earlier release
# shares one cargo target directory there (its dependencies built once), and is built without LTO
# (`--config`: the release's behaviour does not depend on it; the build takes a third of the time).
# Concurrent callers (several test binaries, one per server of make compat) are serialized on
# <dir>.lock, and builds on the cache's one lock. Prints the module's path. Exit status 3: the commit is not in this clone's
# history (a shallow clone; fetch the full history with `git fetch --unshallow`).
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

CACHE=${RL_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/redis-ratelimit}/old-modules
BUILT=$CACHE/$FULL
mkdir -p "$CACHE"
exec 8>"$CACHE/.lock"  # one lock: the releases share one target directory
flock 8
if [ ! -f "$BUILT/libredis_ratelimit.so" ]; then
  rm -rf "$BUILT"
  mkdir -p "$BUILT/src"
  git archive --format=tar "$FULL" | tar -x -C "$BUILT/src"
  # The old tree's own Cargo.lock pins what it was released with; the target directory is the
  # cache's, so this build never touches the current one's artifacts.
  "${CARGO:-cargo}" build --quiet --release --locked \
    --config profile.release.lto=false --config profile.release.codegen-units=16 \
    --manifest-path "$BUILT/src/Cargo.toml" --target-dir "$CACHE/target" >&2
  cp "$CACHE/target/release/libredis_ratelimit.so" "$BUILT/libredis_ratelimit.so.tmp"
  mv "$BUILT/libredis_ratelimit.so.tmp" "$BUILT/libredis_ratelimit.so"
  rm -rf "$BUILT/src"
fi
rm -f "$MODULE" "$DIR/built-from"
cp "$BUILT/libredis_ratelimit.so" "$MODULE.tmp"
mv "$MODULE.tmp" "$MODULE"
echo "$FULL" > "$DIR/built-from"
echo "$MODULE"
