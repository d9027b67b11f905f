#!/usr/bin/env bash
# make dist: the release artifact a user can download and load without a Rust toolchain.
#
#   dist/redis-ratelimit-<version>-linux-<arch>.tar.gz   (and .tar.gz.sha256 beside it)
#     redis-ratelimit-<version>-linux-<arch>/
#       libredis_ratelimit.so   the module, stripped
#       LICENSE  README.md  CHANGELOG.md
#       redis.conf              the loadmodule line (and the module's settings, commented)
#       SHA256SUMS              of the files above (sha256sum -c SHA256SUMS)
#
# The version is Cargo.toml's; the architecture is uname -m's. The tarball is reproducible for
# the same module (sorted names, fixed owner and mtime, gzip without a timestamp).
# MODULE=<path> packages another build (default target/dist/libredis_ratelimit.so);
# DIST_DIR=<dir> writes elsewhere (default dist/). Prints the tarball's path.
set -euo pipefail
cd "$(dirname "$0")/.."
ROOT=$(pwd)
MODULE=${MODULE:-$ROOT/target/dist/libredis_ratelimit.so}
DIST_DIR=${DIST_DIR:-$ROOT/dist}
VERSION=$(sed -n 's/^version = "\(.*\)"$/\1/p' Cargo.toml | head -n1)
ARCH=$(uname -m)
NAME=redis-ratelimit-$VERSION-linux-$ARCH
[ -n "$VERSION" ] || { echo "dist: no version in Cargo.toml" >&2; exit 1; }
[ -f "$MODULE" ] || { echo "dist: no module at $MODULE (make build first)" >&2; exit 1; }

STAGE=$DIST_DIR/$NAME
rm -rf "$STAGE" "$DIST_DIR/$NAME.tar.gz" "$DIST_DIR/$NAME.tar.gz.sha256"
mkdir -p "$STAGE"
strip --strip-unneeded -o "$STAGE/libredis_ratelimit.so" "$MODULE"
chmod 0755 "$STAGE/libredis_ratelimit.so"  # Redis refuses a module without execute permission
cp LICENSE README.md CHANGELOG.md "$STAGE/"
cat > "$STAGE/redis.conf" <<CONF
# redis-ratelimit $VERSION: add this line to your redis.conf (the path where you put the
# module; make install puts it in /usr/local/lib/redis/modules/), or run
# MODULE LOAD /path/to/libredis_ratelimit.so at runtime.
loadmodule /usr/local/lib/redis/modules/libredis_ratelimit.so

# The module's settings (defaults shown; docs/operations.md "Configuration"), settable here or
# with CONFIG SET at runtime:
# ratelimit.slide-log-max 1000000
# ratelimit.lease-max 10000
CONF
(cd "$STAGE" && sha256sum libredis_ratelimit.so LICENSE README.md CHANGELOG.md redis.conf > SHA256SUMS)
EPOCH=$(git log -1 --format=%ct 2>/dev/null || echo 0)
tar --sort=name --mtime="@$EPOCH" --owner=0 --group=0 --numeric-owner \
  -C "$DIST_DIR" -cf - "$NAME" | gzip -n -9 > "$DIST_DIR/$NAME.tar.gz"
(cd "$DIST_DIR" && sha256sum "$NAME.tar.gz" > "$NAME.tar.gz.sha256")
rm -rf "$STAGE"
echo "$DIST_DIR/$NAME.tar.gz"
