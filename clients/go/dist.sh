#!/usr/bin/env bash
# make go-dist: the Go module as a release artifact, for a service that installs it without
# the repository (the module path is not published on a Go proxy):
#
#   dist/redis-ratelimit-go-<version>.tar.gz   (and .tar.gz.sha256 beside it)
#     redis-ratelimit-go-<version>/   the module github.com/redis-ratelimit/redis-ratelimit/clients/go:
#       go.mod  go.sum  the packages' sources (no tests, no bench/ or compat/)  README.md  LICENSE
#
# Installed with a replace directive pointing at the unpacked directory (clients/go/README.md
# "Install"; install_test.go does exactly that in a project outside the repository). The
# version is Cargo.toml's; the tarball is reproducible (sorted names, fixed owner and mtime,
# gzip without a timestamp). DIST_DIR=<dir> writes elsewhere (default dist/). Prints the
# tarball's path.
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
root=$(cd "$here/../.." && pwd)
VERSION=$(sed -n 's/^version = "\(.*\)"$/\1/p' "$root/Cargo.toml" | head -n1)
[ -n "$VERSION" ] || { echo "go-dist: no version in Cargo.toml" >&2; exit 1; }
DIST_DIR=${DIST_DIR:-$root/dist}
NAME=redis-ratelimit-go-$VERSION
mkdir -p "$DIST_DIR"
DIST_DIR=$(cd "$DIST_DIR" && pwd)
stage=$(mktemp -d)
trap 'rm -rf "$stage"' EXIT
mkdir "$stage/$NAME"
(cd "$here" && find . -type f \( -name '*.go' -o -name go.mod -o -name go.sum -o -name README.md \) \
    -not -name '*_test.go' -not -path './bench/*' -not -path './compat/*' \
    -not -path './internal/testserver/*' -print0 |
  xargs -0 cp --parents -t "$stage/$NAME")
cp "$root/LICENSE" "$stage/$NAME/"
EPOCH=$(git -C "$root" log -1 --format=%ct 2>/dev/null || echo 0)
rm -f "$DIST_DIR/$NAME.tar.gz" "$DIST_DIR/$NAME.tar.gz.sha256"
tar --sort=name --mtime="@$EPOCH" --owner=0 --group=0 --numeric-owner \
  -C "$stage" -cf - "$NAME" | gzip -n -9 > "$DIST_DIR/$NAME.tar.gz"
(cd "$DIST_DIR" && sha256sum "$NAME.tar.gz" > "$NAME.tar.gz.sha256")
echo "$DIST_DIR/$NAME.tar.gz"
