#!/usr/bin/env bash
# ddprun --rdzv-backend=etcd over https, end to end: a real etcd 3.4 of this test's own started by
# scripts/ci/start_etcd.sh with TLS and client-certificate authentication (ETCD_CI_TLS_*),
# certificates made now by tests/rendezvous/make_test_certs.sh.
#  1. two agents form a 2-node job over https and exit 0 with ranks 0..1 of world 2: one names
#     its files with ddprun's keys (tls_ca, tls_cert, tls_key), the other with torchrun's legacy
#     etcd names (protocol=https, cacert, cert, key);
#  2. an agent without a client certificate is refused by etcd and exits non-zero, saying so;
#  3. an agent given an https:// endpoint without tls_ca is a usage error (exit 2).
# Agents and etcd are stopped by pid (etcd by its pid file) on exit, also on failure.
set -euo pipefail
BIN=${DDP_BIN_DIR:?}
SRC=${DDP_SOURCE_DIR:?}
TMP=${DDP_TEST_TMP:?}
CI=$SRC/scripts/ci
WORKER=$SRC/tests/integration/env_worker.sh
: "${ETCD_CI_DIR:?}" "${ETCD_CI_CLIENT_PORT:?}"
rm -rf "${TMP:?}"/*
fail() { echo "FAIL: $*" >&2; exit 1; }
PIDS=()
cleanup() {
  local rc=$? pid
  for pid in "${PIDS[@]}"; do kill -TERM "$pid" 2>/dev/null || true; done
  for pid in "${PIDS[@]}"; do wait "$pid" 2>/dev/null || true; done
  "$CI/stop_etcd.sh" --purge >/dev/null 2>&1 || true
  exit "$rc"
}
trap cleanup EXIT

"$SRC/tests/rendezvous/make_test_certs.sh" "$TMP/certs"
C=$TMP/certs
export ETCD_CI_TLS_CERT=$C/server.pem ETCD_CI_TLS_KEY=$C/server.key ETCD_CI_TLS_CLIENT_CA=$C/ca.pem
export ETCD_CI_TLS_CLIENT_CERT=$C/client.pem ETCD_CI_TLS_CLIENT_KEY=$C/client.key
"$CI/stop_etcd.sh" --purge >/dev/null 2>&1 || true
"$CI/start_etcd.sh"
ENDPOINT=127.0.0.1:$ETCD_CI_CLIENT_PORT
COMMON=keep_alive_interval=0.5,heartbeat_timeout=10,join_timeout=60,retry_timeout=3

agent() {  # NAME NNODES CONF: one agent of job tls-NAME in the background, output in $TMP/NAME.N.*
  local n=${#PIDS[@]}
  timeout -k 5 90 "$BIN/ddprun" --rdzv-backend=etcd --rdzv-endpoint="$ENDPOINT" \
    --rdzv-id="tls-$1" --nnodes="$2" --nproc-per-node=1 --rdzv-conf="$COMMON,$3" "$WORKER" \
    >"$TMP/$1.$n.out" 2>"$TMP/$1.$n.err" &
  PIDS+=($!)
}

agent job 2 "tls_ca=$C/ca.pem,tls_cert=$C/client.pem,tls_key=$C/client.key"
agent job 2 "protocol=https,cacert=$C/ca.pem,cert=$C/client.pem,key=$C/client.key"
for pid in "${PIDS[@]}"; do
  wait "$pid" || fail "an agent of the https job exited $?: $(tail -5 "$TMP"/job.*.err)"
done
PIDS=()
ranks=$(grep -ho 'WORKER rank=[0-9]* local=0 world=2' "$TMP"/job.*.out | sort | tr '\n' ' ' || true)
[[ "$ranks" == "WORKER rank=0 local=0 world=2 WORKER rank=1 local=0 world=2 " ]] ||
  fail "ranks over https: '$ranks'"

agent nocert 1 "tls_ca=$C/ca.pem"
rc=0
wait "${PIDS[0]}" || rc=$?
PIDS=()
((rc != 0)) || fail "an agent without a client certificate was served by etcd --client-cert-auth"
grep -q "etcd" "$TMP/nocert.0.err" || fail "no error naming etcd: $(cat "$TMP/nocert.0.err")"

rc=0
"$BIN/ddprun" --rdzv-backend=etcd --rdzv-endpoint="https://$ENDPOINT" --rdzv-id=x --nnodes=1 \
  "$WORKER" >"$TMP/noca.out" 2>"$TMP/noca.err" || rc=$?
((rc == 2)) && grep -q "https needs --rdzv-conf tls_ca=" "$TMP/noca.err" ||
  fail "https:// without tls_ca: exit $rc, $(cat "$TMP/noca.err")"
echo "PASS: a 2-node job over https etcd with client certificates; no certificate refused"
