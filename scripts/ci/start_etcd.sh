#!/usr/bin/env bash
# Starts a single-member etcd 3.4 on 127.0.0.1 for tests, handled by a pid file. Idempotent: a
# healthy etcd with the same parameters is reused. An existing data dir is kept, so
# stop (or SIGKILL) + start resumes with the same data. See docs/development.md#tests.
#
#   scripts/ci/start_etcd.sh        # client + JSON gateway on 127.0.0.1:23790, peer on :23800
#   . /tmp/etcd-ci/env              # ETCD_ENDPOINT, ETCDCTL_API=3, ETCDCTL_ENDPOINTS
#   scripts/ci/stop_etcd.sh --purge
#
# Knobs (defaults): ETCD_CI_DIR (/tmp/etcd-ci), ETCD_CI_CLIENT_PORT (23790), ETCD_CI_PEER_PORT
# (23800), ETCD_CI_FAST (1: --heartbeat-interval 10 --election-timeout 100 --unsafe-no-fsync),
# ETCD_CI_V2 (0; 1 adds --enable-v2=true), ETCD_CI_TIMEOUT (30 s).
# TLS: ETCD_CI_TLS_CERT + ETCD_CI_TLS_KEY (PEM files) serve the client port over https; with
# ETCD_CI_TLS_CLIENT_CA clients need a certificate signed by that CA (--client-cert-auth), and
# ETCD_CI_TLS_CLIENT_CERT + ETCD_CI_TLS_CLIENT_KEY are what the health check presents.
# Exit status 0 once GET /health says {"health":"true"} from our own pid's listener.
set -euo pipefail
CI_NAME=start_etcd
HERE=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
# shellcheck source=common.sh
. "$HERE/common.sh"

DIR=${ETCD_CI_DIR:-/tmp/etcd-ci}
CLIENT_PORT=${ETCD_CI_CLIENT_PORT:-23790}
PEER_PORT=${ETCD_CI_PEER_PORT:-23800}
FAST=${ETCD_CI_FAST:-1}
V2=${ETCD_CI_V2:-0}
TIMEOUT=${ETCD_CI_TIMEOUT:-30}
TLS_CERT=${ETCD_CI_TLS_CERT:-}
TLS_KEY=${ETCD_CI_TLS_KEY:-}
TLS_CLIENT_CA=${ETCD_CI_TLS_CLIENT_CA:-}
[[ -z "$TLS_CERT" || -n "$TLS_KEY" ]] || ci_die "ETCD_CI_TLS_CERT needs ETCD_CI_TLS_KEY"
[[ -z "$TLS_CLIENT_CA" || -n "$TLS_CERT" ]] || ci_die "ETCD_CI_TLS_CLIENT_CA needs ETCD_CI_TLS_CERT"
[[ "$DIR" == /* && "$DIR" != / ]] || ci_die "ETCD_CI_DIR must be an absolute path, got '$DIR'"
for tool in etcd ss flock setsid timeout; do
  command -v "$tool" >/dev/null || ci_die "$tool not found (apt-get install etcd-server iproute2 util-linux)"
done
PARAMS="client=$CLIENT_PORT peer=$PEER_PORT fast=$FAST v2=$V2 tls=$TLS_CERT:$TLS_CLIENT_CA"
SCHEME=http
[[ -n "$TLS_CERT" ]] && SCHEME=https
URL=$SCHEME://127.0.0.1:$CLIENT_PORT
PIDFILE=$DIR/etcd.pid

mkdir -p "$(dirname "$DIR")"
exec 9>"$DIR.lock"
flock -w "$TIMEOUT" 9 || ci_die "could not lock $DIR.lock within ${TIMEOUT}s"

# GET /health over bash's /dev/tcp (no curl needed); HTTP/1.0 so etcd closes after answering.
# Over https, curl (the health check only: it does not check etcd's certificate).
healthy() {
  local out
  if [[ "$SCHEME" == https ]]; then
    local cert=()
    [[ -n "${ETCD_CI_TLS_CLIENT_CERT:-}" ]] && cert=(--cert "$ETCD_CI_TLS_CLIENT_CERT" --key "$ETCD_CI_TLS_CLIENT_KEY")
    out=$(curl -sk --max-time 2 "${cert[@]}" "$URL/health" 2>/dev/null) || true
  else
    out=$(timeout 2 bash -c 'exec 3<>"/dev/tcp/127.0.0.1/$1" &&
      printf "GET /health HTTP/1.0\r\nHost: 127.0.0.1\r\n\r\n" >&3 && cat <&3' _ "$CLIENT_PORT" 2>/dev/null) || true
  fi
  [[ "$out" == *'"health":"true"'* ]]
}

pid=$(ci_read_pid "$PIDFILE")
if [[ -n "$pid" ]] && ci_pid_owned "$pid" "$DIR" && [[ "$(cat "$DIR/params" 2>/dev/null)" == "$PARAMS" ]] &&
   ci_port_owned_by "$CLIENT_PORT" "$pid" && healthy; then
  ci_log "reusing healthy etcd pid $pid at $URL"
  exit 0
fi
# Not healthy or other parameters: stop ours (keep the data), then start afresh on the same dir.
ETCD_CI_LOCKED=1 "$HERE/stop_etcd.sh"

for port in "$CLIENT_PORT" "$PEER_PORT"; do
  l=$(ci_port_listener "$port")
  [[ -z "$l" ]] || ci_die "port $port already in use: $l (set ETCD_CI_CLIENT_PORT / ETCD_CI_PEER_PORT)"
done

mkdir -p "$DIR/data"
chmod 700 "$DIR/data"
# A data dir from an earlier run already holds the member: "new" must not re-bootstrap it.
state=new
[[ -d "$DIR/data/member" ]] && state=existing
extra=()
[[ "$FAST" == 1 ]] && extra+=(--heartbeat-interval 10 --election-timeout 100 --unsafe-no-fsync)
[[ "$V2" == 1 ]] && extra+=(--enable-v2=true)
[[ -n "$TLS_CERT" ]] && extra+=(--cert-file "$TLS_CERT" --key-file "$TLS_KEY")
[[ -n "$TLS_CLIENT_CA" ]] && extra+=(--client-cert-auth --trusted-ca-file "$TLS_CLIENT_CA")

setsid etcd --name ci --data-dir "$DIR/data" \
  --listen-client-urls "$URL" --advertise-client-urls "$URL" \
  --listen-peer-urls "http://127.0.0.1:$PEER_PORT" --initial-advertise-peer-urls "http://127.0.0.1:$PEER_PORT" \
  --initial-cluster "ci=http://127.0.0.1:$PEER_PORT" --initial-cluster-state "$state" \
  --initial-cluster-token "ci-$CLIENT_PORT" --logger zap --log-outputs "$DIR/etcd.log" "${extra[@]}" \
  </dev/null >>"$DIR/etcd.out" 2>&1 9>&- &
pid=$!
echo "$pid" >"$PIDFILE"

deadline=$(( $(ci_now_ms) + TIMEOUT * 1000 ))
until healthy && ci_port_owned_by "$CLIENT_PORT" "$pid"; do
  if ! ci_pid_alive "$pid"; then
    tail -n 20 "$DIR/etcd.log" "$DIR/etcd.out" >&2 2>/dev/null || true
    rm -f "$PIDFILE"
    ci_die "etcd (pid $pid) exited during start-up; logs in $DIR"
  fi
  if (( $(ci_now_ms) >= deadline )); then
    tail -n 20 "$DIR/etcd.log" >&2 2>/dev/null || true
    ETCD_CI_LOCKED=1 "$HERE/stop_etcd.sh"
    ci_die "etcd at $URL not healthy within ${TIMEOUT}s; logs in $DIR"
  fi
  sleep 0.02
done
echo "$PARAMS" >"$DIR/params"
{
  echo "export ETCD_ENDPOINT=127.0.0.1:$CLIENT_PORT"
  echo "export ETCD_CI_SCHEME=$SCHEME"
  echo "export ETCDCTL_API=3"
  echo "export ETCDCTL_ENDPOINTS=$URL"
  echo "export ETCD_CI_DIR=$DIR"
} >"$DIR/env"
ci_log "etcd pid $pid healthy at $URL (data $DIR/data); . $DIR/env"
