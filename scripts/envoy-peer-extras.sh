#!/usr/bin/env bash
# The servers envoyproxy/ratelimit's TLS and Sentinel integration tests expect, on the kit's
# ports (../shared/peers/README-envoy.md, "Not run here"), on loopback, without stunnel or root:
#   - Redis speaking TLS only, password123 (redis-server's own TLS, as their stunnel fronts a
#     plain one): 7831 and 7832, and 7833 requiring a client certificate signed by cert.pem
#     (their stunnel's `verify = 2` with `CAfile = cert.pem`). cert.pem (a certificate for
#     localhost followed by its CA) and key.pem go to $RL_WORK/ratelimit, their PROJECT_DIR,
#     where their client-certificate test reads them; their CI adds cert.pem to the system's
#     trust store, here SSL_CERT_FILE points the service at it.
#   - Sentinel: masters 7861 and 7863 (password123) with replicas 7862 and 7864, watched as
#     `mymaster` by three Sentinels each, 7841-7843 and 7844-7846 (their conf/sentinel*.conf,
#     with these masters' ports).
# Every data server loads $REDIS_LOADMODULE when set (a module-backed service decides there).
#
#   envoy-peer-extras.sh start           bring them up (refuses a port already in use)
#   envoy-peer-extras.sh stop            stop what start started (by the PIDs it recorded)
#   envoy-peer-extras.sh tests           the tests they make runnable, one per line
#   envoy-peer-extras.sh allow           their allow-never-counts.txt entries (NAME@FILE:LINE):
#                                        all but Test_mTLS run testBasicBaseConfig, whose line
#                                        703 expects a refused request to count
#   envoy-peer-extras.sh run CMD ARG...  start, run CMD with SSL_CERT_FILE set (and TESTS =
#                                        the kit's default list plus these when TESTS is unset;
#                                        an ALLOW_FAIL holding allow-never-counts.txt's
#                                        entries gets the `allow` entries too),
#                                        stop; exits with CMD's status
# RL_WORK as for the kit (default /tmp/envoy-ratelimit-kit; fetch.sh must have filled it);
# the kit at ENVOY_KIT, else $PEERS/envoy-ratelimit, else ../shared/peers/envoy-ratelimit.
set -euo pipefail
ROOT=$(cd "$(dirname "$0")/.." && pwd)
KIT=${ENVOY_KIT:-${PEERS:-$ROOT/../shared/peers}/envoy-ratelimit}
RL_WORK=${RL_WORK:-/tmp/envoy-ratelimit-kit}
DIR=$RL_WORK/extras
PROJECT_DIR=$RL_WORK/ratelimit
SERVER=${REDIS_SERVER:-$(command -v redis-server)}
CLI=${REDIS_CLI:-$(command -v redis-cli)}
PASS=password123
TLS_PORTS="7831 7832 7833"
SENTINEL_PORTS="7841 7842 7843 7844 7845 7846"
DATA_PORTS="7861 7862 7863 7864"

EXTRA_TESTS="
TestBasicTLSConfig/WithoutPerSecondRedisTLS
TestBasicTLSConfig/WithPerSecondRedisTLS
TestBasicTLSConfig/WithoutPerSecondRedisTLSWithLocalCache
TestBasicTLSConfig/WithPerSecondRedisTLSWithLocalCache
TestBasicTLSConfig/WithoutPerSecondRedisTLSWithClientCert
Test_mTLS
TestBasicAuthConfigWithRedisSentinel/WithoutPerSecondRedisAuth
TestBasicAuthConfigWithRedisSentinel/WithPerSecondRedisAuth
TestBasicAuthConfigWithRedisSentinel/WithoutPerSecondRedisAuthWithLocalCache
TestBasicAuthConfigWithRedisSentinel/WithPerSecondRedisAuthWithLocalCache
"

say() { echo "envoy-peer-extras: $*" >&2; }

module_args() {
  if [ -n "${REDIS_LOADMODULE:-}" ]; then echo "--loadmodule $REDIS_LOADMODULE"; fi
}

# spawn NAME ARGS...: a server in the background, its PID recorded, its output in NAME.log
spawn() {
  local name=$1; shift
  "$@" >"$DIR/$name.log" 2>&1 &
  echo $! >>"$DIR/pids"
}

# wait_until WHAT CMD...: CMD succeeds within 20 s, else the logs and exit 1
wait_until() {
  local what=$1; shift
  for _ in $(seq 1 200); do
    if "$@" >/dev/null 2>&1; then return 0; fi
    sleep 0.1
  done
  say "$what did not come up within 20 s"; tail -n 5 "$DIR"/*.log >&2; exit 1
}

certs() {
  # A CA, and a certificate for localhost it signed (server and client use): cert.pem holds the
  # certificate then the CA, so it is at once the chain to present and the CA file to trust.
  local c=$DIR/certs
  mkdir -p "$c"
  openssl req -x509 -newkey rsa:2048 -nodes -days 2 -subj /CN=ratelimit-kit-ca \
    -keyout "$c/ca.key" -out "$c/ca.pem" 2>/dev/null
  openssl req -newkey rsa:2048 -nodes -subj /CN=localhost \
    -keyout "$c/key.pem" -out "$c/leaf.csr" 2>/dev/null
  printf 'subjectAltName=DNS:localhost,IP:127.0.0.1\nextendedKeyUsage=serverAuth,clientAuth\nbasicConstraints=CA:FALSE\n' >"$c/ext.cnf"
  openssl x509 -req -in "$c/leaf.csr" -CA "$c/ca.pem" -CAkey "$c/ca.key" -CAcreateserial \
    -days 2 -extfile "$c/ext.cnf" -out "$c/leaf.pem" 2>/dev/null
  cat "$c/leaf.pem" "$c/ca.pem" >"$c/cert.pem"
  cp "$c/cert.pem" "$c/key.pem" "$PROJECT_DIR/"
}

start() {
  [ -d "$PROJECT_DIR" ] || { say "$PROJECT_DIR is missing: run the kit's fetch.sh first"; exit 2; }
  for p in $TLS_PORTS $SENTINEL_PORTS $DATA_PORTS; do
    if (exec 3<>"/dev/tcp/127.0.0.1/$p") 2>/dev/null; then say "port $p is in use"; exit 2; fi
  done
  rm -rf "$DIR"; mkdir -p "$DIR"
  certs
  local c=$DIR/certs common=(--bind 127.0.0.1 --save "" --appendonly no --requirepass "$PASS")
  # shellcheck disable=SC2046
  for p in $TLS_PORTS; do
    local auth_clients=no
    [ "$p" = 7833 ] && auth_clients=yes
    mkdir -p "$DIR/$p"
    spawn "redis-tls-$p" "$SERVER" --port 0 --tls-port "$p" --dir "$DIR/$p" "${common[@]}" \
      --tls-cert-file "$c/cert.pem" --tls-key-file "$c/key.pem" --tls-ca-cert-file "$c/cert.pem" \
      --tls-auth-clients "$auth_clients" $(module_args)
  done
  for pair in 7861:7841 7863:7844; do
    local master=${pair%%:*} first=${pair##*:} replica
    replica=$((master + 1))
    mkdir -p "$DIR/$master" "$DIR/$replica"
    # shellcheck disable=SC2046
    spawn "redis-$master" "$SERVER" --port "$master" --dir "$DIR/$master" "${common[@]}" $(module_args)
    # shellcheck disable=SC2046
    spawn "redis-$replica" "$SERVER" --port "$replica" --dir "$DIR/$replica" "${common[@]}" \
      --replicaof 127.0.0.1 "$master" --masterauth "$PASS" $(module_args)
    for s in $first $((first + 1)) $((first + 2)); do
      mkdir -p "$DIR/$s"
      printf 'port %s\nbind 127.0.0.1\ndir %s\nsentinel monitor mymaster 127.0.0.1 %s 2\nsentinel auth-pass mymaster %s\nsentinel down-after-milliseconds mymaster 3000\n' \
        "$s" "$DIR/$s" "$master" "$PASS" >"$DIR/$s/sentinel.conf"
      spawn "sentinel-$s" "$SERVER" "$DIR/$s/sentinel.conf" --sentinel
    done
  done
  for p in $TLS_PORTS; do
    wait_until "TLS Redis $p" "$CLI" --tls --cacert "$c/cert.pem" --cert "$c/cert.pem" --key "$c/key.pem" \
      -h localhost -p "$p" -a "$PASS" --no-auth-warning PING
  done
  for p in $SENTINEL_PORTS; do
    wait_until "Sentinel $p" bash -c "'$CLI' -p $p SENTINEL get-master-addr-by-name mymaster | grep -q 127.0.0.1"
  done
  say "up: TLS Redis $TLS_PORTS, Sentinels $SENTINEL_PORTS (masters 7861, 7863); SSL_CERT_FILE=$c/cert.pem"
}

stop() {
  [ -f "$DIR/pids" ] || return 0
  while read -r pid; do kill "$pid" 2>/dev/null || true; done <"$DIR/pids"
  while read -r pid; do
    for _ in $(seq 1 50); do kill -0 "$pid" 2>/dev/null || break; sleep 0.1; done
    kill -9 "$pid" 2>/dev/null || true
  done <"$DIR/pids"
  rm -f "$DIR/pids"
}

case ${1:-} in
  start) start ;;
  stop) stop ;;
  tests) printf '%s\n' $EXTRA_TESTS ;;
  allow) printf '%s@integration_test.go:703\n' $EXTRA_TESTS | grep -v '^Test_mTLS@' ;;
  run)
    shift
    [ $# -gt 0 ] || { say "run: give the command to run"; exit 2; }
    trap stop EXIT
    start
    export SSL_CERT_FILE=$DIR/certs/cert.pem
    if [ -z "${TESTS:-}" ]; then
      defaults=$(sed -n '/^DEFAULT_TESTS="/,/^"/p' "$KIT/run-suite.sh" | grep '^Test' || true)
      TESTS=$(printf '%s\n' $defaults $EXTRA_TESTS)
      export TESTS
    fi
    if printf '%s' "${ALLOW_FAIL:-}" | grep -q '@integration_test.go:703'; then
      ALLOW_FAIL="$ALLOW_FAIL
$("$0" allow)"
      export ALLOW_FAIL
    fi
    set +e
    "$@"
    status=$?
    set -e
    exit $status
    ;;
  *) sed -n '2,/^set -euo pipefail/p' "$0" | sed '$d' >&2; exit 2 ;;
esac
