#!/usr/bin/env bash
# ddprun under exactly the environment Kubeflow sets in a pod
# (docs/deploy.md#kubernetes-kubeflow-pytorchjob--trainer-v2), with no ddprun flags at all: the
# container command is `ddprun <program>`, as with torchrun.
#   v1-elastic   training-operator v1, PyTorchJob with elasticPolicy (2 worker pods): PET_NNODES
#                (min:max), PET_NPROC_PER_NODE, PET_RDZV_BACKEND=c10d, PET_RDZV_ENDPOINT,
#                PET_RDZV_ID, PET_RDZV_CONF, PET_MAX_RESTARTS, plus the pod-level MASTER_ADDR,
#                MASTER_PORT, WORLD_SIZE, RANK, PYTHONUNBUFFERED the operator also sets
#   v2           Trainer v2 (2 nodes): PET_NNODES, PET_NPROC_PER_NODE, PET_NODE_RANK,
#                PET_MASTER_ADDR, PET_MASTER_PORT (static rendezvous at the master)
#   v1-standalone  elasticPolicy.standalone: PET_STANDALONE="" (empty), PET_NNODES=1
#   v1-noid      the same elastic pods without PET_RDZV_ID (the operator sets it only from
#                elasticPolicy.rdzvId): run id "none", as with torchrun; while that job runs, a
#                second job (another entry point, also "none") on the same endpoint is refused at
#                once with one line naming both, and the first finishes undisturbed
# Two "pods" are two ddprun processes on loopback, each started with `env -i` and only these
# variables (plus PATH/HOME), one env-dump worker each. Every process is stopped by pid and reaped.
#   kubeflow_env_test.sh ddprund  the rendezvous endpoint (v1) / master port (v2) is served by a
#                                 ddprund (a Service in front of ddprund, as configs/pytorchjob.yaml
#                                 suggests): no agent hosts the store
#   kubeflow_env_test.sh hosted   the agent whose endpoint is local hosts it (torchrun's default)
set -euo pipefail
MODE=${1:?usage: kubeflow_env_test.sh ddprund|hosted}
BIN=${DDP_BIN_DIR:?}
SRC=${DDP_SOURCE_DIR:?}
TMP=${DDP_TEST_TMP:?}
WORKER=$SRC/tests/integration/env_worker.sh
[[ -x "$BIN/ddprun" ]] || { echo "FAIL: $BIN/ddprun not built" >&2; exit 1; }
rm -rf "${TMP:?}"/*
fail() { echo "FAIL: $*" >&2; exit 1; }
now_ms() { date +%s%3N; }
free_port() { /usr/bin/python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])'; }

PIDS=()
PODS=()
cleanup() {
  local rc=$? pid
  for pid in "${PIDS[@]}"; do kill -TERM "$pid" 2>/dev/null || true; done
  for pid in "${PIDS[@]}"; do
    for _ in $(seq 100); do kill -0 "$pid" 2>/dev/null || break; sleep 0.05; done
    kill -KILL "$pid" 2>/dev/null || true
    wait "$pid" 2>/dev/null || true
  done
  exit "$rc"
}
trap cleanup EXIT

# rdzv_port: sets $port for the rendezvous; in ddprund mode a ddprund (pid in PIDS) listens there.
rdzv_port() {
  if [[ "$MODE" == hosted ]]; then port=$(free_port); return; fi
  local file=$TMP/ddprund.$RANDOM.port deadline
  "$BIN/ddprund" --host 127.0.0.1 --port 0 --port-file "$file" >"$file.log" 2>&1 &
  PIDS+=($!)
  deadline=$(( $(now_ms) + 30000 ))
  until [[ -s "$file" ]]; do
    (( $(now_ms) < deadline )) || fail "ddprund wrote no port file: $(cat "$file.log")"
    sleep 0.02
  done
  port=$(cat "$file")
}
# pod NAME VAR=VALUE...: starts `ddprun $WORKER` in the background with exactly that environment.
# PROGRAM (default $WORKER) is the entry point.
pod() {
  local name=$1
  shift
  env -i PATH="$PATH" HOME="${HOME:-/root}" "$@" timeout -k 5 90 "$BIN/ddprun" "${PROGRAM:-$WORKER}" \
    >"$TMP/$name.out" 2>"$TMP/$name.err" &
  PIDS+=($!)
  PODS+=($!)
}
# wait_pods: every pod started so far exits 0 (bounded by the timeout in pod()).
wait_pods() {
  local pid rc
  for pid in "${PODS[@]}"; do
    rc=0
    wait "$pid" || rc=$?
    [[ $rc == 0 ]] || { tail -n 20 "$TMP"/*.err >&2; fail "a pod's ddprun exited $rc"; }
  done
  PODS=()
}
# field FILE NAME: the values of NAME=... on the worker lines of FILE, sorted.
field() { grep -oE "WORKER .*" "$1" | grep -oE " $2=[^ ]+" | cut -d= -f2 | sort -n | tr '\n' ' '; }

# --- training-operator v1, elasticPolicy, 2 worker pods ----------------------------------------
t0=$(now_ms)
rdzv_port
for i in 0 1; do
  pod "v1-worker-$i" PYTHONUNBUFFERED=0 MASTER_ADDR=job-worker-0 MASTER_PORT=23456 WORLD_SIZE=2 RANK=$i \
    PET_NNODES=1:2 PET_NPROC_PER_NODE=1 PET_RDZV_BACKEND=c10d PET_RDZV_ENDPOINT=127.0.0.1:$port \
    PET_RDZV_ID=job PET_RDZV_CONF=join_timeout=60 PET_MAX_RESTARTS=3
done
wait_pods
cat "$TMP"/v1-worker-*.out
[[ "$(cat "$TMP"/v1-worker-*.out | grep -c 'WORKER ')" == 2 ]] || fail "v1: want 2 worker lines"
[[ "$(field <(cat "$TMP"/v1-worker-*.out) rank)" == "0 1 " ]] || fail "v1: ranks $(field <(cat "$TMP"/v1-worker-*.out) rank)"
[[ "$(field <(cat "$TMP"/v1-worker-*.out) world)" == "2 2 " ]] || fail "v1: WORLD_SIZE"
[[ "$(field <(cat "$TMP"/v1-worker-*.out) run)" == "job job " ]] || fail "v1: TORCHELASTIC_RUN_ID is not PET_RDZV_ID"
# Workers talk to the agent's worker store, not to the pod-level MASTER_ADDR/PORT.
grep 'WORKER ' "$TMP"/v1-worker-*.out | grep -q 'master=job-worker-0' && fail "v1: worker got the pod's MASTER_ADDR"
[[ "$(field <(cat "$TMP"/v1-worker-*.out) reach)" == "1 1 " ]] || fail "v1: worker store not reachable"
echo "v1 elastic: 2 pods done in $(( $(now_ms) - t0 )) ms"

# --- Trainer v2, 2 nodes, static rendezvous at PET_MASTER_ADDR:PET_MASTER_PORT ------------------
t0=$(now_ms)
rdzv_port
for i in 1 0; do
  pod "v2-node-$i" PET_NNODES=2 PET_NPROC_PER_NODE=1 PET_NODE_RANK=$i \
    PET_MASTER_ADDR=127.0.0.1 PET_MASTER_PORT=$port
done
wait_pods
cat "$TMP"/v2-node-*.out
for i in 0 1; do
  [[ "$(field "$TMP/v2-node-$i.out" rank)" == "$i " ]] || fail "v2: node $i's worker has RANK $(field "$TMP/v2-node-$i.out" rank)"
  [[ "$(field "$TMP/v2-node-$i.out" group)" == "$i " ]] || fail "v2: node $i's GROUP_RANK is not PET_NODE_RANK"
  [[ "$(field "$TMP/v2-node-$i.out" world)" == "2 " ]] || fail "v2: node $i: WORLD_SIZE"
done
echo "v2: 2 nodes done in $(( $(now_ms) - t0 )) ms"

# --- training-operator v1, elasticPolicy.standalone: PET_STANDALONE="" --------------------------
t0=$(now_ms)
pod v1-standalone PET_STANDALONE= PET_NNODES=1 PET_NPROC_PER_NODE=2 PET_MAX_RESTARTS=0
wait_pods
cat "$TMP/v1-standalone.out"
[[ "$(field "$TMP/v1-standalone.out" rank)" == "0 1 " ]] || fail "standalone: ranks"
[[ "$(field "$TMP/v1-standalone.out" world)" == "2 2 " ]] || fail "standalone: WORLD_SIZE"
echo "v1 standalone: done in $(( $(now_ms) - t0 )) ms"
# --- v1 elastic pods without PET_RDZV_ID; a second job meets them under "none" ------------------
t0=$(now_ms)
rdzv_port
marks=$TMP/noid-marks
mkdir -p "$marks"
noid=(PET_NNODES=1:2 PET_NPROC_PER_NODE=1 PET_RDZV_BACKEND=c10d PET_RDZV_ENDPOINT=127.0.0.1:$port
      PET_RDZV_CONF=join_timeout=60,last_call_timeout=1 PET_MAX_RESTARTS=3)
for i in 0 1; do
  pod "v1-noid-$i" "${noid[@]}" DDP_TEST_MARK_DIR="$marks" DDP_TEST_GO_FILE="$TMP/noid-go"
done
first=("${PODS[@]}")
deadline=$(( $(now_ms) + 60000 ))
until [[ -e "$marks/started.0" && -e "$marks/started.1" ]]; do
  (( $(now_ms) < deadline )) || { tail -n 20 "$TMP"/v1-noid-*.err >&2; fail "v1-noid: the job's 2 workers did not start"; }
  sleep 0.05
done
# Another job (another entry point), the same variables: refused while the first runs.
ln -sf "$WORKER" "$TMP/eval_worker.sh"
rc=0
env -i PATH="$PATH" HOME="${HOME:-/root}" "${noid[@]}" timeout -k 5 60 "$BIN/ddprun" "$TMP/eval_worker.sh" \
  >"$TMP/v1-other.out" 2>"$TMP/v1-other.err" || rc=$?
[[ $rc == 1 ]] || { cat "$TMP/v1-other.err" >&2; fail "v1-noid: the second job exited $rc, want 1"; }
grep -q "rendezvous 'none': another job is running under this run id on this rendezvous store (it runs: env_worker.sh, nnodes 1:2; this one: eval_worker.sh, nnodes 1:2)" "$TMP/v1-other.err" ||
  { cat "$TMP/v1-other.err" >&2; fail "v1-noid: the second job's error does not name both jobs"; }
grep -q 'WORKER ' "$TMP/v1-other.out" && fail "v1-noid: the second job ran a worker"
for pid in "${first[@]}"; do kill -0 "$pid" 2>/dev/null || fail "v1-noid: a pod of the first job is gone"; done
touch "$TMP/noid-go"
wait_pods
[[ "$(field <(cat "$TMP"/v1-noid-*.out) run)" == "none none " ]] || fail "v1-noid: TORCHELASTIC_RUN_ID is not none"
[[ "$(field <(cat "$TMP"/v1-noid-*.out) rank)" == "0 1 " ]] || fail "v1-noid: ranks"
[[ "$(field <(cat "$TMP"/v1-noid-*.out) restart)" == "0 0 " ]] || fail "v1-noid: the first job restarted"
echo "v1 without a run id, a second job refused: done in $(( $(now_ms) - t0 )) ms"

echo "PASS ($MODE)"
