#!/usr/bin/env bash
# The host libraries' own test suites through the package's drop-ins, on one server per suite
# (a free loopback port, the module loaded, stopped by its PID):
#   redis_rate v10's rate_test.go and example_test.go -> redisrate (import swapped, the
#                                       address ":6379" / "localhost:6379" -> the server)
#   ulule/limiter v3's redis store_test -> limiterstore (import swapped; REDIS_URI -> the server)
# Each file is copied unmodified but for those lines into a temporary module that requires this
# package (replace => the working tree) and the host module (for its shared tests), then run
# with `go test -v`; the pass counts are printed per suite and server.
#
# Environment: RL_MODULE (the module .so), COMPAT_SERVERS (server binaries, space separated;
# default redis-server), REDIS_RATE_VERSION, ULULE_VERSION.
set -euo pipefail
here=$(cd "$(dirname "$0")/.." && pwd)
root=$(cd "$here/../.." && pwd)
module=${RL_MODULE:?RL_MODULE must name libredis_ratelimit.so}
servers=${COMPAT_SERVERS:-redis-server}
redis_rate=${REDIS_RATE_VERSION:-v10.0.1}
ulule=${ULULE_VERSION:-v3.11.2}
self=github.com/redis-ratelimit/redis-ratelimit/clients/go

dir_of() { go mod download -json "$1" | sed -n 's/^\t"Dir": "\(.*\)",$/\1/p'; }
rate_dir=$(dir_of "github.com/go-redis/redis_rate/v10@$redis_rate")
ulule_dir=$(dir_of "github.com/ulule/limiter/v3@$ulule")
[ -f "$rate_dir/rate_test.go" ] && [ -f "$ulule_dir/drivers/store/redis/store_test.go" ] || {
  echo "compat: the host modules' test files are missing" >&2; exit 1; }

work=$(mktemp -d)
pid=""
cleanup() { [ -n "$pid" ] && kill "$pid" 2>/dev/null && wait "$pid" 2>/dev/null; rm -rf "$work"; }
trap cleanup EXIT

# The temporary module: this package from the working tree, the host modules pinned.
mkdir -p "$work/redisrate" "$work/limiterstore"
cat > "$work/go.mod" <<MOD
module compat

go 1.22

require (
	$self v0.0.0
	github.com/go-redis/redis_rate/v10 $redis_rate
	github.com/ulule/limiter/v3 $ulule
)

replace $self => $here
MOD
for f in rate_test.go example_test.go; do
  sed -e "s#\"github.com/go-redis/redis_rate/v10\"#redis_rate \"$self/redisrate\"#" \
    "$rate_dir/$f" > "$work/redisrate/$f"
done
sed -e "s#\"github.com/ulule/limiter/v3/drivers/store/redis\"#redis \"$self/limiterstore\"#" \
  "$ulule_dir/drivers/store/redis/store_test.go" > "$work/limiterstore/store_test.go"
# The only lines that differ from the host files: the imports (and below, the address).
for f in redisrate/rate_test.go redisrate/example_test.go limiterstore/store_test.go; do chmod u+w "$work/$f"; done
(cd "$work" && go mod tidy >/dev/null 2>&1 || go mod tidy)

free_port() { python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])'; }

start_server() { # $1 server binary; sets pid and port
  local bin=$1 tries
  for tries in 1 2 3; do
    port=$(free_port)
    "$bin" --port "$port" --bind 127.0.0.1 --save '' --appendonly no --dir "$work" \
      --loadmodule "$module" >"$work/server.log" 2>&1 &
    pid=$!
    for _ in $(seq 1 400); do
      kill -0 "$pid" 2>/dev/null || break
      [ "$(redis-cli -p "$port" ping 2>/dev/null)" = PONG ] && return 0
      sleep 0.05
    done
    kill "$pid" 2>/dev/null; wait "$pid" 2>/dev/null || true; pid=""
  done
  echo "compat: $bin did not start:" >&2; cat "$work/server.log" >&2; return 1
}

stop_server() { kill "$pid" 2>/dev/null; wait "$pid" 2>/dev/null || true; pid=""; }

run_suite() { # $1 name, $2 package dir; env for the test in the rest
  local name=$1 pkg=$2 out status passed failed
  shift 2
  out=$(cd "$work" && env "$@" go test -count=1 -v "./$pkg/" 2>&1) && status=0 || status=$?
  passed=$(grep -c -- '^--- PASS' <<<"$out" || true)
  failed=$(grep -c -- '^--- FAIL' <<<"$out" || true)
  echo "$name on ${server#"$root"/}: $passed passed, $failed failed"
  if [ "$status" != 0 ] || [ "$failed" != 0 ] || [ "$passed" = 0 ]; then echo "$out"; return 1; fi
}

fail=0
for server in $servers; do
  start_server "$server"
  sed -i -e "s#\":6379\"#\"127.0.0.1:$port\"#" "$work/redisrate/rate_test.go"
  sed -i -e "s#\"localhost:6379\"#\"127.0.0.1:$port\"#" "$work/redisrate/example_test.go"
  run_suite "redis_rate $redis_rate rate_test.go + example_test.go" redisrate || fail=1
  sed -i -e "s#\"127.0.0.1:$port\"#\":6379\"#" "$work/redisrate/rate_test.go"
  sed -i -e "s#\"127.0.0.1:$port\"#\"localhost:6379\"#" "$work/redisrate/example_test.go"
  stop_server
  start_server "$server"
  run_suite "ulule/limiter $ulule store_test.go" limiterstore "REDIS_URI=redis://127.0.0.1:$port/0" || fail=1
  stop_server
done
# What differs from the host files: only the import lines (the address is swapped back).
diff "$rate_dir/rate_test.go" "$work/redisrate/rate_test.go" | grep '^[<>]' || true
diff "$rate_dir/example_test.go" "$work/redisrate/example_test.go" | grep '^[<>]' || true
diff "$ulule_dir/drivers/store/redis/store_test.go" "$work/limiterstore/store_test.go" | grep '^[<>]' || true
exit $fail
