#!/usr/bin/env bash
# ddprun --rdzv-backend=etcd end to end, on a real etcd 3.4 of this test's own (scripts/ci/
# start_etcd.sh; its own directory and ports, from ETCD_CI_*), so SIGKILLing it disturbs no other
# test:
#  1. 4 agents (--nnodes=4 --nproc-per-node=1, endpoint 127.0.0.1:<port>) rendezvous over etcd;
#     their workers get ranks 0..3 of world 4 and wait for a go-file;
#  2. etcd is SIGKILLed (by its pid file) and kept down for 2 s while the agents heartbeat every
#     0.5 s (heartbeat_timeout 10 s: the default 0.5 s x 3 would rightly call a 2 s silence a
#     loss), then restarted on the same data directory;
#     the agents write to it again (its revision grows);
#  3. the go-file releases the workers: every agent exits 0 and no worker was restarted
#     (TORCHELASTIC_RESTART_COUNT 0): the job survived the etcd restart.
# The etcd-v2 alias runs a second, short job (no kill) over the same etcd.
# Agents and etcd are stopped by pid and reaped on exit, also on failure.
set -euo pipefail
BIN=${DDP_BIN_DIR:?}
SRC=${DDP_SOURCE_DIR:?}
TMP=${DDP_TEST_TMP:?}
CI=$SRC/scripts/ci
WORKER=$SRC/tests/integration/env_worker.sh
: "${ETCD_CI_DIR:?}" "${ETCD_CI_CLIENT_PORT:?}"
[[ -x "$BIN/ddprun" ]] || { echo "FAIL: $BIN/ddprun not built" >&2; exit 1; }
rm -rf "${TMP:?}"/*
mkdir -p "$TMP/marks"
fail() { echo "FAIL: $*" >&2; exit 1; }
now_ms() { date +%s%3N; }
alive() { local s; s=$(cat "/proc/$1/stat" 2>/dev/null) || return 1; s=${s##*) }; [[ ${s:0:1} != Z ]]; }

# count DIR GLOB: how many files in DIR match GLOB.
count() { local f n=0; for f in "$1"/$2; do [[ -e "$f" ]] && n=$((n + 1)); done; echo "$n"; }
PIDS=()
cleanup() {
  local rc=$? pid
  for pid in "${PIDS[@]}"; do kill -TERM "$pid" 2>/dev/null || true; done
  for pid in "${PIDS[@]}"; do
    for _ in $(seq 100); do alive "$pid" || break; sleep 0.05; done
    kill -KILL "$pid" 2>/dev/null || true
    wait "$pid" 2>/dev/null || true
  done
  "$CI/stop_etcd.sh" --purge >/dev/null 2>&1 || true
  exit "$rc"
}
trap cleanup EXIT

"$CI/stop_etcd.sh" --purge >/dev/null 2>&1 || true   # a fresh data dir
"$CI/start_etcd.sh"
ENDPOINT=127.0.0.1:$ETCD_CI_CLIENT_PORT

# agents BACKEND RUNID COUNT: starts COUNT agents in the background (PIDS), logs in $TMP/<run>.<i>.
agents() {
  local backend=$1 run=$2 count=$3 i
  for ((i = 0; i < count; i++)); do
    timeout -k 5 90 "$BIN/ddprun" --rdzv-backend="$backend" --rdzv-endpoint="$ENDPOINT" \
      --rdzv-id="$run" --nnodes="$count" --nproc-per-node=1 \
      --rdzv-conf=keep_alive_interval=0.5,heartbeat_timeout=10,join_timeout=60 "$WORKER" \
      >"$TMP/$run.$i.out" 2>"$TMP/$run.$i.err" &
    PIDS+=($!)
  done
}
wait_agents() {
  local pid rc
  for pid in "${PIDS[@]}"; do
    rc=0
    wait "$pid" || rc=$?
    [[ $rc == 0 ]] || { tail -n 15 "$TMP"/*.err >&2; fail "an agent exited $rc"; }
  done
  PIDS=()
}
# revision: etcd's current store revision (POST /v3/kv/range over bash's /dev/tcp, no curl).
revision() {
  local body='{"key":"AA==","count_only":true}' out
  out=$(timeout 5 bash -c 'exec 3<>"/dev/tcp/127.0.0.1/$1" && printf "POST /v3/kv/range HTTP/1.0\r\nHost: x\r\nContent-Type: application/json\r\nContent-Length: ${#2}\r\n\r\n%s" "$2" >&3 && cat <&3' _ "$ETCD_CI_CLIENT_PORT" "$body") || return 1
  grep -oE '"revision":"[0-9]+"' <<<"$out" | grep -oE '[0-9]+'
}
field() { cat "$@" | grep -oE "WORKER .*" | grep -oE " $FIELD=[^ ]+" | cut -d= -f2 | sort -n | tr '\n' ' '; }

# 1. four agents over etcd; workers wait for the go-file
t0=$(now_ms)
export DDP_TEST_MARK_DIR=$TMP/marks DDP_TEST_GO_FILE=$TMP/go DDP_TEST_GO_TIMEOUT=60
agents etcd e2e 4
deadline=$(( $(now_ms) + 60000 ))
until [[ $(count "$TMP/marks" 'started.*') == 4 ]]; do
  (( $(now_ms) < deadline )) || { tail -n 15 "$TMP"/*.err >&2; fail "4 workers did not start"; }
  sleep 0.05
done
t_started=$(now_ms)

# 2. SIGKILL etcd mid-job, 2 s outage, restart on the same data dir
etcd_pid=$(cat "$ETCD_CI_DIR/etcd.pid")
kill -KILL "$etcd_pid"
deadline=$(( $(now_ms) + 10000 ))
while alive "$etcd_pid"; do (( $(now_ms) < deadline )) || fail "etcd $etcd_pid survived SIGKILL"; sleep 0.02; done
sleep 2   # the outage itself (fault injection), not a synchronisation
"$CI/start_etcd.sh"
[[ "$(cat "$ETCD_CI_DIR/etcd.pid")" != "$etcd_pid" ]] || fail "etcd was not restarted"
t_back=$(now_ms)
# The agents write to the restarted etcd (heartbeats): its revision grows without our help.
rev0=$(revision) || fail "no revision from the restarted etcd"
deadline=$(( $(now_ms) + 20000 ))
until rev=$(revision) && (( rev > rev0 )); do
  (( $(now_ms) < deadline )) || fail "no agent wrote to the restarted etcd within 20 s (revision $rev0)"
  sleep 0.05
done

# 3. release the workers; the job must finish without a restart
touch "$TMP/go"
wait_agents
FIELD=rank; [[ "$(field "$TMP"/e2e.*.out)" == "0 1 2 3 " ]] || fail "ranks '$(field "$TMP"/e2e.*.out)'"
FIELD=world; [[ "$(field "$TMP"/e2e.*.out)" == "4 4 4 4 " ]] || fail "WORLD_SIZE '$(field "$TMP"/e2e.*.out)'"
FIELD=restart; [[ "$(field "$TMP"/e2e.*.out)" == "0 0 0 0 " ]] || fail "a worker was restarted: '$(field "$TMP"/e2e.*.out)'"
FIELD=reach; [[ "$(field "$TMP"/e2e.*.out)" == "1 1 1 1 " ]] || fail "worker store not reachable"
grep -q "rendezvous store etcd 127.0.0.1:$ETCD_CI_CLIENT_PORT" "$TMP/e2e.0.err" || fail "agent 0 did not log the etcd store"
echo "etcd: 4 workers up in $((t_started - t0)) ms; etcd killed and back in $((t_back - t_started)) ms (2 s outage);" \
  "job done $(( $(now_ms) - t_back )) ms after the restart"

# 4. the etcd-v2 alias
unset DDP_TEST_GO_FILE
t0=$(now_ms)
agents etcd-v2 alias 2
wait_agents
FIELD=rank; [[ "$(field "$TMP"/alias.*.out)" == "0 1 " ]] || fail "etcd-v2: ranks '$(field "$TMP"/alias.*.out)'"
echo "etcd-v2 alias: 2 agents done in $(( $(now_ms) - t0 )) ms"
echo "PASS"
