#!/usr/bin/env bash
# Builds redis-cell (brandur/redis-cell, the module CL.THROTTLE comes from; benchmarked side by
# side with ours) once from its `git archive` in ../shared/servers/, caches the module at
# target/redis-cell/libredis_cell.so and prints that path. Rebuilds only when it is missing.
#
# Environment: CELL_TARBALL (default ../shared/servers/redis-cell-4d42338.tar.gz relative to
# the repository root), CARGO (default cargo).
set -euo pipefail

BENCH_DIR="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
ROOT="$(dirname "$BENCH_DIR")"
TARBALL="${CELL_TARBALL:-$ROOT/../shared/servers/redis-cell-4d42338.tar.gz}"
OUT="$ROOT/target/redis-cell"
SO="$OUT/libredis_cell.so"
CARGO="${CARGO:-cargo}"

if [[ -f "$SO" ]]; then
  echo "$SO"
  exit 0
fi
if [[ ! -f "$TARBALL" ]]; then
  echo "redis-cell: no source archive at $TARBALL" >&2
  exit 1
fi

echo "redis-cell: building from $TARBALL" >&2
src="$OUT/src"
rm -rf "$src"
mkdir -p "$src"
tar xzf "$TARBALL" -C "$src" --strip-components=1
# Unpacked under our workspace's directory: an empty [workspace] table makes it a workspace of
# its own (its code is otherwise built as archived).
grep -q '^\[workspace\]' "$src/Cargo.toml" || printf '\n[workspace]\n' >>"$src/Cargo.toml"
# Its own target directory, next to the cached module; its code is built as archived.
export CARGO_TARGET_DIR="$OUT/target"
(
  cd "$src"
  # Its lockfile first; if this toolchain cannot use it, let cargo resolve again, preferring
  # versions compatible with the installed Rust.
  "$CARGO" build --release --locked >&2 ||
    {
      echo "redis-cell: --locked build failed, resolving again" >&2
      CARGO_RESOLVER_INCOMPATIBLE_RUST_VERSIONS=fallback "$CARGO" build --release >&2
    }
)
cp "$CARGO_TARGET_DIR/release/libredis_cell.so" "$SO.tmp"
mv "$SO.tmp" "$SO"
echo "$SO"
