#!/usr/bin/env bash
# ddprun under real Slurm (the slurm_cluster fixture: 4 nodes n1..n4, each in its own network
# namespace with its own IP and hostname). No ddprun flag names the endpoint, node count, node
# rank or run id: they come from SLURM_*.
#   ddprun_slurm_test.sh env       srun -N4 ddprun --nproc-per-node=2 <env dump>: ranks 0..7,
#                                  WORLD_SIZE 8, MASTER_ADDR reachable from every node; the same
#                                  through scripts/slurm/ddprun-srun
#   ddprun_slurm_test.sh train     the Gloo trainer on 4 nodes; rank 2 fails at step 25 and the
#                                  group restarts inside the allocation (generation 1), resumes
#                                  from the step-20 checkpoint and completes
#   ddprun_slurm_test.sh sbatch    scripts/slurm/ddprun.sbatch, as shipped (no GPU or CPU
#                                  options: the cluster has neither), runs the trainer to completion
#   ddprun_slurm_test.sh preempt   the template's pre-emption flow: --time=1 --signal=USR1@20, the
#                                  workers take the USR1 (write a mark, exit 0) and the job ends
#                                  COMPLETED 0:0 before its time limit
#   ddprun_slurm_test.sh scancel   scancel --signal=USR1 reaches every worker through ddprun and
#                                  the step ends with exit 0 (a notice, no kill timer); plain
#                                  scancel (SIGTERM) ends a job; no process is left behind
#   ddprun_slurm_test.sh requeue   the template's requeue rule (issue 22 item 2), both paths:
#                                  1. rank 1 fails at step 3 in every generation (MAX_RESTARTS=5,
#                                  DDP_VERDICT_AFTER=3):
#                                  ddprun's verdict stops the job after 3 generations, the job
#                                  ends FAILED 87:0 and is not requeued (Restarts=0);
#                                  2. pre-emption: scancel --signal=TERM reaches the step (every
#                                  ddprun), ddprun exits 143, and the template requeues the job
#                                  (Restarts=1, "requeueing" in its output);
#                                  3. node loss: n3 is drained and set DOWN under a --no-kill job
#                                  (the drain, as a health check's, keeps it out: ReturnToService=2
#                                  takes a DOWN node whose slurmd answers back at once); the step
#                                  ends (srun: node failure) and the template requeues the job
#                                  naming n3 (n3 is resumed on exit, also on failure)
#   ddprun_slurm_test.sh elastic K  --nnodes=3:4 --max-restarts=0 with Gloo (torch) workers in a
#                                  collective loop; kill -9 of node K's agent (K = 1, 2 or 3): the
#                                  round ends at once (the agent's closed connection) or the
#                                  others' workers fail with connection errors (collateral): no
#                                  restart is spent, the survivors renumber 0..2 in SLURM_NODEID
#                                  order and finish; the lost node is named in their logs.
#                                  K = 0 kills the agent hosting the rendezvous store: the
#                                  survivors move it to node 1 (store failover) and do the same
# A second argument picks who serves the rendezvous store:
#   hosted   (default) nothing but SLURM_*: the agent on the first node hosts it
#   ddprund  a ddprund in the controller's (root) namespace, given as --rdzv-endpoint (the
#            sbatch template: RDZV_ENDPOINT); node count, node rank and run id still from SLURM_*
# Every process started here is found by pid (and by a marker in its environment) and stopped and
# reaped on exit, also on failure.
set -euo pipefail
MODE=${1:?usage: ddprun_slurm_test.sh env|train|sbatch|preempt|scancel|requeue [hosted|ddprund] | elastic K}
RDZV=${2:-hosted}
VICTIM=
if [[ "$MODE" == elastic ]]; then VICTIM=${2:?elastic K}; RDZV=hosted; fi
BIN=${DDP_BIN_DIR:?}
SRC=${DDP_SOURCE_DIR:?}
TMP=${DDP_TEST_TMP:?}
WORKER=$SRC/tests/integration/env_worker.sh
. "${SLURM_CI_DIR:?}/env"
SUBNET=${SLURM_CI_NETNS_SUBNET:?}
[[ -x "$BIN/ddprun" ]] || { echo "FAIL: $BIN/ddprun not built" >&2; exit 1; }
rm -rf "${TMP:?}/$MODE-$RDZV"
mkdir -p "$TMP/$MODE-$RDZV"
W=$TMP/$MODE-$RDZV
fail() { echo "FAIL ($MODE): $*" >&2; exit 1; }
now_ms() { date +%s%3N; }
T0=$(now_ms)

# Marker in the environment of every process of this test (srun exports it to the tasks).
export DDP_SLURM_TEST_MARK="ddp-slurm-$MODE-$$-$RANDOM"
alive() { local s; s=$(cat "/proc/$1/stat" 2>/dev/null) || return 1; s=${s##*) }; [[ ${s:0:1} != Z ]]; }
marked_pids() {
  local p
  for p in /proc/[0-9]*; do
    p=${p#/proc/}
    [[ "$p" == "$$" || "$p" == "$BASHPID" ]] && continue
    grep -qzx "DDP_SLURM_TEST_MARK=$DDP_SLURM_TEST_MARK" "/proc/$p/environ" 2>/dev/null && echo "$p"
  done
  return 0
}
JOBS=()
BGPIDS=()
DOWNED=
cleanup() {
  local rc=$? pid j
  [[ -z "$DOWNED" ]] || scontrol update NodeName="$DOWNED" State=RESUME 2>/dev/null || true
  for j in "${JOBS[@]}"; do scancel "$j" 2>/dev/null || true; done
  for pid in "${BGPIDS[@]}"; do kill -TERM "$pid" 2>/dev/null || true; done
  for pid in "${BGPIDS[@]}"; do
    for _ in $(seq 100); do alive "$pid" || break; sleep 0.05; done
    kill -KILL "$pid" 2>/dev/null || true
    wait "$pid" 2>/dev/null || true
  done
  # Anything else still carrying our marker (a stray worker) goes by pid.
  for pid in $(marked_pids); do kill -KILL "$pid" 2>/dev/null || true; done
  exit "$rc"
}
trap cleanup EXIT

# count DIR GLOB: how many files in DIR match GLOB.
count() { local f n=0; for f in "$1"/$2; do [[ -e "$f" ]] && n=$((n + 1)); done; echo "$n"; }
# wait_job JOBID SECONDS: polls until the job has left the queue (sbatch --wait is slow).
wait_job() {
  local jid=$1 deadline=$(( $(now_ms) + $2 * 1000 ))
  while [[ -n "$(squeue -h -j "$jid" 2>/dev/null)" ]]; do
    (( $(now_ms) < deadline )) || fail "job $jid still in the queue after $2 s: $(squeue -j "$jid" 2>&1 | tail -1)"
    sleep 0.1
  done
}
job_restarts() { scontrol show job -o "$1" 2>/dev/null | grep -oE 'Restarts=[0-9]+' | cut -d= -f2; }
job_state() { scontrol show job -o "$1" 2>/dev/null | grep -oE 'JobState=[A-Z_]+ .*ExitCode=[0-9:]+' | sed -E 's/JobState=([A-Z_]+).*ExitCode=([0-9:]+)/\1 \2/'; }

# wait_gone SECONDS PID...: every pid exits (zombies count as gone) within the budget.
wait_gone() {
  local budget=$1 pid deadline
  shift
  deadline=$(( $(now_ms) + budget * 1000 ))
  for pid in "$@"; do
    while alive "$pid"; do
      (( $(now_ms) < deadline )) || fail "pid $pid ($(tr '\0' ' ' <"/proc/$pid/cmdline" 2>/dev/null)) still runs after ${budget} s"
      sleep 0.05
    done
  done
}

# check_workers FILE COUNT NPROC: COUNT worker lines, ranks 0..COUNT-1 once each, one world,
# group g on host n(g+1), MASTER_ADDR = n1 resolving to node 1's IP and reachable.
check_workers() {
  local file=$1 count=$2 nproc=$3 lines ranks want run
  lines=$(grep -oE 'WORKER .*' "$file" || true)
  [[ $(grep -c . <<<"$lines") == "$count" ]] || fail "want $count worker lines, got: $lines"
  ranks=$(grep -oE ' rank=[0-9]+' <<<"$lines" | sed 's/.*=//' | sort -n | tr '\n' ' ')
  want=$(seq 0 $((count - 1)) | tr '\n' ' ')
  [[ "$ranks" == "$want" ]] || fail "ranks '$ranks', want '$want'"
  grep -v " world=$count " <<<"$lines" && fail "a worker has WORLD_SIZE != $count"
  grep -v " groups=$((count / nproc)) " <<<"$lines" && fail "a worker has GROUP_WORLD_SIZE != $((count / nproc))"
  # MASTER_ADDR is node rank 0's address on the route to the rendezvous endpoint (n1's IP).
  grep -vE " master=$SUBNET\.1:[0-9]+ master_ip=$SUBNET\.1 reach=1 " <<<"$lines" &&
    fail "a worker's MASTER_ADDR is not n1's address $SUBNET.1 or not reachable from its node"
  while read -r line; do
    local rank group host
    rank=$(grep -oE ' rank=[0-9]+' <<<"$line" | cut -d= -f2)
    group=$(grep -oE ' group=[0-9]+' <<<"$line" | cut -d= -f2)
    host=$(grep -oE ' host=[^ ]+' <<<"$line" | cut -d= -f2)
    [[ $group == $((rank / nproc)) && $host == "n$((group + 1))" ]] ||
      fail "rank $rank: group $group on $host, want group $((rank / nproc)) on n$((rank / nproc + 1))"
  done <<<"$lines"
  run=$(grep -oE ' run=[^ ]+' <<<"$lines" | sort -u)
  [[ $(grep -c . <<<"$run") == 1 && "$run" =~ ^\ run=[0-9]+\.[0-9]+$ ]] || fail "run ids: $run"
}

# RDZV_ARGS: the ddprun flags of the chosen rendezvous (none when hosted).
RDZV_ARGS=()
if [[ "$RDZV" == ddprund ]]; then
  [[ -x "$BIN/ddprund" ]] || fail "$BIN/ddprund not built"
  # Not marked: it is not part of the job, and it is stopped by pid in cleanup.
  env -u DDP_SLURM_TEST_MARK "$BIN/ddprund" --host "$SUBNET.254" --port 0 --port-file "$W/ddprund.port" \
    >"$W/ddprund.log" 2>&1 &
  BGPIDS+=($!)
  deadline=$(( $(now_ms) + 30000 ))
  until [[ -s "$W/ddprund.port" ]]; do
    (( $(now_ms) < deadline )) || fail "ddprund wrote no port file: $(cat "$W/ddprund.log")"
    sleep 0.02
  done
  RDZV_ENDPOINT=$SUBNET.254:$(cat "$W/ddprund.port")
  export RDZV_ENDPOINT
  RDZV_ARGS=(--rdzv-endpoint="$RDZV_ENDPOINT")
elif [[ "$RDZV" != hosted ]]; then
  fail "second argument: hosted or ddprund"
fi

case "$MODE" in
env)
  timeout -k 5 60 srun -N4 --ntasks-per-node=1 "$BIN/ddprun" "${RDZV_ARGS[@]}" --nproc-per-node=2 \
    "$WORKER" >"$W/srun.out" 2>"$W/srun.err" || { cat "$W/srun.err"; fail "srun ddprun exited $?"; }
  check_workers "$W/srun.out" 8 2
  grep -q "Slurm" "$W/srun.err" || { cat "$W/srun.err"; fail "ddprun logged no Slurm detection line"; }
  t1=$(now_ms)
  DDPRUN=$BIN/ddprun timeout -k 5 60 "$SRC/scripts/slurm/ddprun-srun" -N 4 -- "${RDZV_ARGS[@]}" \
    --nproc-per-node=1 "$WORKER" >"$W/wrap.out" 2>"$W/wrap.err" || { cat "$W/wrap.err"; fail "ddprun-srun exited $?"; }
  check_workers "$W/wrap.out" 4 1
  grep -q "^ddprun-srun: running as a new job: srun --nodes=4 --ntasks-per-node=1 $BIN/ddprun ${RDZV_ARGS[*]:+${RDZV_ARGS[*]} }--nproc-per-node=1 " \
    "$W/wrap.err" || { cat "$W/wrap.err"; fail "ddprun-srun did not print its srun line"; }
  echo "8 workers via srun in $((t1 - T0)) ms; 4 via ddprun-srun in $(( $(now_ms) - t1 )) ms"
  ;;

train)
  "$BIN/train" make-data --out "$W/data" --samples 4000 --features 16 --classes 4 --shards 4 --seed 3 >/dev/null
  timeout -k 5 120 srun -N4 --ntasks-per-node=1 "$BIN/ddprun" "${RDZV_ARGS[@]}" --nproc-per-node=1 --max-restarts=1 \
    "$BIN/train" --config "$SRC/configs/quickstart.json" --data "$W/data" \
    --checkpoint-dir "$W/ckpt" --metrics "$W/metrics.jsonl" --max-steps 40 \
    --fail-at-step 25 --fail-rank 2 >"$W/train.log" 2>&1 ||
    { tail -40 "$W/train.log"; fail "srun ddprun train exited $?"; }
  grep -q "injected failure: rank 2 stops at step 25" "$W/train.log" || fail "no injected failure in the log"
  grep -q "resuming from .* at step 20" "$W/train.log" || fail "generation 1 did not resume from step 20"
  /usr/bin/python3 - "$W/metrics.jsonl" <<'PYEOF' || fail "metrics"
import json, sys
lines = [json.loads(l) for l in open(sys.argv[1])]
gen1 = [l for l in lines if l["generation"] == 1]
assert gen1, f"no generation-1 metrics: {lines}"
assert gen1[0]["step"] > 20, f"generation 1 started over: {gen1[0]}"
assert lines[-1]["step"] == 40 and lines[-1]["world_size"] == 4, f"final {lines[-1]}"
print("final", lines[-1])
PYEOF
  echo "4-node Gloo training with one restart in $(( $(now_ms) - T0 )) ms"
  ;;

sbatch)
  "$BIN/train" make-data --out "$W/data" --samples 2000 --features 16 --classes 4 --shards 4 --seed 4 >/dev/null
  # The template as shipped: the CI nodes have no GPUs and 4 CPUs, and nothing is overridden but
  # where the binaries and the output are.
  jid=$(DDPRUN=$BIN/ddprun TRAIN=$BIN/train TRAIN_CONFIG=$SRC/configs/quickstart.json \
    sbatch --parsable --chdir="$W" --output="$W/job-%j.out" \
      "$SRC/scripts/slurm/ddprun.sbatch" --data "$W/data" --metrics "$W/metrics.jsonl" --max-steps 20) ||
    fail "sbatch failed"
  jid=${jid%%;*}
  JOBS+=("$jid")
  wait_job "$jid" 120
  state=$(job_state "$jid")
  [[ "$state" == "COMPLETED 0:0" ]] || { cat "$W/job-$jid.out"; fail "job $jid ended as '$state'"; }
  grep -q "^job $jid on 4 node(s): n\[1-4\]; 1 worker(s) per node$" "$W/job-$jid.out" ||
    fail "no job banner: $(head -3 "$W/job-$jid.out")"
  /usr/bin/python3 - "$W/metrics.jsonl" <<'PYEOF' || fail "metrics"
import json, sys
lines = [json.loads(l) for l in open(sys.argv[1])]
assert lines and lines[-1]["step"] == 20 and lines[-1]["world_size"] == 4, f"metrics {lines}"
PYEOF
  echo "sbatch job $jid (4 nodes, trainer) done in $(( $(now_ms) - T0 )) ms"
  ;;

preempt)
  mkdir -p "$W/marks"
  # The template with a short lead time. slurmctld checks time limits every 30 s and sends the
  # warning at the first check from which it could be late (end - lead - 30 s): here at the first
  # check 10 s or more after the start, so 10 to 40 s in, after the workers are up and well before
  # the 60 s limit. Each worker takes it like a trainer that checkpoints: it writes
  # marks/signal.<rank> and exits 0. Without a USR1 the workers give up after 100 s (rc 3) and the
  # job would end TIMEOUT.
  jid=$(DDPRUN=$BIN/ddprun TRAIN=$WORKER DDP_TEST_TRAP=USR1 DDP_TEST_MARK_DIR=$W/marks \
    DDP_TEST_GO_FILE=$W/never DDP_TEST_GO_TIMEOUT=100 \
    sbatch --parsable --time=1 --signal=USR1@20 --chdir="$W" --output="$W/job-%j.out" \
      "$SRC/scripts/slurm/ddprun.sbatch") || fail "sbatch failed"
  jid=${jid%%;*}
  JOBS+=("$jid")
  wait_job "$jid" 120
  state=$(job_state "$jid")
  [[ "$state" == "COMPLETED 0:0" ]] || { cat "$W/job-$jid.out"; fail "job $jid ended as '$state'"; }
  [[ $(count "$W/marks" 'signal.*') == 4 ]] ||
    { cat "$W/job-$jid.out"; fail "USR1 reached $(count "$W/marks" 'signal.*') of 4 workers"; }
  grep -q "received SIGUSR1" "$W/job-$jid.out" || { cat "$W/job-$jid.out"; fail "no ddprun logged the USR1"; }
  grep -q "SIGKILL" "$W/job-$jid.out" && { cat "$W/job-$jid.out"; fail "a worker was killed"; }
  echo "pre-empted job $jid ended COMPLETED in $(( $(now_ms) - T0 )) ms"
  ;;

scancel)
  mkdir -p "$W/marks"
  export DDP_TEST_MARK_DIR=$W/marks DDP_TEST_GO_FILE=$W/never DDP_TEST_GO_TIMEOUT=100
  # 1. scancel --signal=USR1 (what --signal=USR1@90 sends): ddprun forwards it to every worker.
  DDP_TEST_TRAP=USR1 srun -N4 --ntasks-per-node=1 -J "ddp-usr1-$$" "$BIN/ddprun" "${RDZV_ARGS[@]}" --nproc-per-node=2 \
    --signals-to-handle=SIGTERM,SIGINT,SIGUSR1 "$WORKER" >"$W/usr1.out" 2>&1 &
  BGPIDS+=($!)
  srun1=$!
  deadline=$(( $(now_ms) + 60000 ))
  until [[ $(count "$W/marks" 'started.*') == 8 ]]; do
    (( $(now_ms) < deadline )) || { cat "$W/usr1.out"; fail "8 workers did not start"; }
    sleep 0.05
  done
  jid=$(squeue -h -n "ddp-usr1-$$" -o %i | head -1)
  [[ -n "$jid" ]] || fail "no job ddp-usr1-$$ in the queue"
  JOBS+=("$jid")
  pids=$(cat "$W"/marks/started.* | tr '\n' ' ')   # worker pid + its parent's (the guardian), per worker
  scancel --signal=USR1 "$jid"
  deadline=$(( $(now_ms) + 30000 ))
  until [[ $(count "$W/marks" 'signal.*') == 8 ]]; do
    (( $(now_ms) < deadline )) || { cat "$W/usr1.out"; fail "USR1 reached $(count "$W/marks" 'signal.*') of 8 workers"; }
    sleep 0.05
  done
  wait_gone 30 $pids "$srun1"
  # A notice, not a stop: the workers took it and exited 0, so the step succeeded.
  rc=0
  wait "$srun1" || rc=$?
  [[ $rc == 0 ]] || { cat "$W/usr1.out"; fail "srun with USR1 exited $rc (want 0)"; }
  # Every agent handled it (Slurm signals every process of the step, so a worker may exit before
  # its agent forwards; that agent then logs "received SIGUSR1 while waiting for the rendezvous").
  [[ $(grep -c "received SIGUSR1[;]* " "$W/usr1.out") == 4 ]] ||
    { cat "$W/usr1.out"; fail "not every ddprun logged that it handled SIGUSR1"; }
  wait_job "$jid" 30
  # 2. plain scancel (SIGTERM, then SIGKILL after KillWait) of a job whose workers ignore nothing.
  rm -f "$W"/marks/*
  unset DDP_TEST_TRAP
  srun -N4 --ntasks-per-node=1 -J "ddp-term-$$" "$BIN/ddprun" "${RDZV_ARGS[@]}" --nproc-per-node=2 "$WORKER" \
    >"$W/term.out" 2>&1 &
  BGPIDS+=($!)
  srun2=$!
  deadline=$(( $(now_ms) + 60000 ))
  until [[ $(count "$W/marks" 'started.*') == 8 ]]; do
    (( $(now_ms) < deadline )) || { cat "$W/term.out"; fail "8 workers did not start (2nd job)"; }
    sleep 0.05
  done
  jid=$(squeue -h -n "ddp-term-$$" -o %i | head -1)
  [[ -n "$jid" ]] || fail "no job ddp-term-$$ in the queue"
  JOBS+=("$jid")
  pids=$(cat "$W"/marks/started.* | tr '\n' ' ')
  t1=$(now_ms)
  scancel "$jid"
  wait_gone 30 $pids "$srun2"
  wait_job "$jid" 30
  echo "scancel: all 8 workers and 4 agents gone $(( $(now_ms) - t1 )) ms after scancel"
  # Nothing with this test's marker is left on any node.
  left=$(marked_pids)
  [[ -z "$left" ]] || fail "processes left behind: $(for p in $left; do tr '\0' ' ' <"/proc/$p/cmdline"; echo; done)"
  ;;
requeue)
  "$BIN/train" make-data --out "$W/data" --samples 2000 --features 16 --classes 4 --shards 4 --seed 5 >/dev/null
  # 1. A hopeless job: the verdict ends it, and it is not requeued.
  # The verdict is opt-in (issue 30): enabled through sbatch's exported environment.
  jid=$(DDPRUN=$BIN/ddprun TRAIN=$BIN/train TRAIN_CONFIG=$SRC/configs/quickstart.json MAX_RESTARTS=5 \
    DDP_VERDICT_AFTER=3 \
    sbatch --parsable --chdir="$W" --output="$W/verdict-%j.out" --open-mode=append \
      "$SRC/scripts/slurm/ddprun.sbatch" --data "$W/data" --max-steps 40 \
      --fail-at-step 3 --fail-rank 1 --fail-generations 10) || fail "sbatch failed"
  jid=${jid%%;*}
  JOBS+=("$jid")
  wait_job "$jid" 120
  out=$W/verdict-$jid.out
  state=$(job_state "$jid")
  [[ "$state" == "FAILED 87:0" ]] || { tail -40 "$out"; fail "verdict job $jid ended as '$state', want FAILED 87:0"; }
  [[ "$(job_restarts "$jid")" == 0 ]] || { tail -20 "$out"; fail "verdict job $jid was requeued"; }
  grep -q "the job stopped with a verdict (exit 87): the same failure in 3 generations in a row: rank 1 exit 1" "$out" ||
    { tail -40 "$out"; fail "no agent logged the verdict"; }
  [[ $(grep -c "the job stopped with a verdict (exit 87)" "$out") == 4 ]] ||
    { tail -40 "$out"; fail "not every one of the 4 agents stopped with the verdict"; }
  grep -q "verdict (exit 87).*not requeued" "$out" || { tail -20 "$out"; fail "the template did not say it does not requeue"; }
  grep -q "requeueing" "$out" && fail "the verdict job was requeued: $(grep requeueing "$out")"
  echo "verdict: job $jid ended FAILED 87:0 after 3 generations, not requeued ($(( $(now_ms) - T0 )) ms)"
  # 2. Pre-emption: SIGTERM to the step; the template requeues the job.
  t1=$(now_ms)
  mkdir -p "$W/marks"
  jid=$(DDPRUN=$BIN/ddprun TRAIN=$WORKER DDP_TEST_MARK_DIR=$W/marks DDP_TEST_GO_FILE=$W/never \
    DDP_TEST_GO_TIMEOUT=100 \
    sbatch --parsable --chdir="$W" --output="$W/preempt-%j.out" --open-mode=append \
      "$SRC/scripts/slurm/ddprun.sbatch") || fail "sbatch failed"
  jid=${jid%%;*}
  JOBS+=("$jid")
  deadline=$(( $(now_ms) + 60000 ))
  until [[ $(count "$W/marks" 'started.*') == 4 ]]; do
    (( $(now_ms) < deadline )) || { cat "$W/preempt-$jid.out"; fail "4 workers did not start"; }
    sleep 0.05
  done
  scancel --signal=TERM "$jid"   # the steps only (not the batch shell), as a pre-emption does
  deadline=$(( $(now_ms) + 60000 ))
  until [[ "$(job_restarts "$jid")" == 1 ]]; do
    (( $(now_ms) < deadline )) || { cat "$W/preempt-$jid.out"; fail "job $jid was not requeued: $(job_state "$jid")"; }
    sleep 0.1
  done
  grep -q "ddprun was stopped by signal 15 (exit 143): pre-emption; requeueing job $jid (requeue 1 of 3)" \
    "$W/preempt-$jid.out" || { cat "$W/preempt-$jid.out"; fail "the template did not say why it requeues"; }
  scancel "$jid"
  wait_job "$jid" 60
  echo "pre-emption: job $jid requeued $(( $(now_ms) - t1 )) ms after start"
  # 3. Node loss: n3 goes DOWN; with --no-kill the job keeps its other nodes. srun ends the step on
  # the node failure (else the other agents would give up after join_timeout); the template sees
  # n3 lost and requeues.
  t1=$(now_ms)
  mkdir -p "$W/marks3"
  jid=$(DDPRUN=$BIN/ddprun TRAIN=$WORKER DDP_TEST_MARK_DIR=$W/marks3 DDP_TEST_GO_FILE=$W/never \
    DDP_TEST_GO_TIMEOUT=100 PET_RDZV_CONF=keep_alive_interval=0.5,heartbeat_timeout=3,join_timeout=8 \
    sbatch --parsable --no-kill --chdir="$W" --output="$W/nodelost-%j.out" --open-mode=append \
      "$SRC/scripts/slurm/ddprun.sbatch") || fail "sbatch failed"
  jid=${jid%%;*}
  JOBS+=("$jid")
  deadline=$(( $(now_ms) + 60000 ))
  until [[ $(count "$W/marks3" 'started.*') == 4 ]]; do
    (( $(now_ms) < deadline )) || { cat "$W/nodelost-$jid.out"; fail "4 workers did not start (node loss)"; }
    sleep 0.05
  done
  DOWNED=n3
  scontrol update NodeName=n3 State=DRAIN Reason=ddp-node-loss-test
  scontrol update NodeName=n3 State=DOWN Reason=ddp-node-loss-test
  deadline=$(( $(now_ms) + 90000 ))
  until [[ "$(job_restarts "$jid")" == 1 ]]; do
    (( $(now_ms) < deadline )) || { cat "$W/nodelost-$jid.out"; fail "job $jid was not requeued after n3 went down: $(job_state "$jid")"; }
    sleep 0.1
  done
  grep -qE "node\(s\) lost: n3 \(exit [0-9]+\); requeueing job $jid \(requeue 1 of 3\)" "$W/nodelost-$jid.out" ||
    { cat "$W/nodelost-$jid.out"; fail "the template did not requeue for the lost node"; }
  scancel "$jid"
  scontrol update NodeName=n3 State=RESUME
  DOWNED=
  deadline=$(( $(now_ms) + 30000 ))   # the fixture as it was: n3 idle and answering
  until [[ "$(sinfo -h -N -n n3 -o %T)" =~ ^(idle|mixed|allocated)$ ]]; do
    (( $(now_ms) < deadline )) || fail "n3 did not come back: $(sinfo -h -N -n n3 -o %T)"
    sleep 0.2
  done
  wait_job "$jid" 60
  echo "node loss: job $jid requeued $(( $(now_ms) - t1 )) ms after start"
  ;;
elastic)
  # Records of multinode_worker.py: rec.n<SLURM_NODEID>.<restart>.<rank>.json (pid, agent ppid).
  mkdir -p "$W/rec"
  export MN_DIR=$W/rec MN_GO_FILE=$W/go MN_TORCH_LOOP=1 PYTHON_EXEC=/usr/bin/python3
  recs() { ls "$W/rec" 2>/dev/null | grep -c "^rec\.n[0-9]*\.$1\." || true; }
  srun -N4 --ntasks-per-node=1 -J "ddp-elastic-$$" --output="$W/agent-%n.out" "$BIN/ddprun" \
    --nnodes=3:4 --nproc-per-node=1 --max-restarts=0 \
    --rdzv-conf=keep_alive_interval=0.5,heartbeat_timeout=3,last_call_timeout=1,join_timeout=60 \
    "$SRC/tests/integration/multinode_worker.py" >"$W/srun.out" 2>&1 &
  BGPIDS+=($!)
  srun_pid=$!
  deadline=$(( $(now_ms) + 90000 ))
  until [[ $(recs 0) == 4 ]]; do
    (( $(now_ms) < deadline )) || { tail -n 5 "$W"/agent-*.out; fail "4 workers did not join the group"; }
    sleep 0.1
  done
  jid=$(squeue -h -n "ddp-elastic-$$" -o %i | head -1)
  [[ -n "$jid" ]] && JOBS+=("$jid")
  # The worker's parent is its guardian; the guardian's parent is the agent.
  guardian=$(/usr/bin/python3 -c 'import json,sys,glob; print(json.load(open(glob.glob(sys.argv[1])[0]))["ppid"])' \
    "$W/rec/rec.n$VICTIM.0.*.json")
  agent=$(ps -o ppid= -p "$guardian" | tr -d ' ')
  [[ -n "$agent" ]] || fail "no agent above the guardian $guardian"
  t1=$(now_ms)
  kill -KILL "$agent"
  echo "killed node $VICTIM's agent (pid $agent)"
  deadline=$(( $(now_ms) + 60000 ))
  until [[ $(recs 1) == 3 ]]; do
    (( $(now_ms) < deadline )) || { tail -n 8 "$W"/agent-*.out; fail "the survivors did not form a world of 3"; }
    sleep 0.1
  done
  t2=$(now_ms)
  echo 3 >"$W/go"
  wait_gone 60 "$srun_pid"
  /usr/bin/python3 - "$W/rec" "$VICTIM" <<'PYEOF' || fail "generation 1"
import glob, json, os, sys
recs = [json.load(open(p)) | {"node": os.path.basename(p).split(".")[1]}
        for p in glob.glob(os.path.join(sys.argv[1], "rec.*.1.*.json"))]
assert sorted(r["node"] for r in recs) == sorted("n%d" % k for k in range(4) if k != int(sys.argv[2])), recs
assert all(r["WORLD_SIZE"] == "3" and r["GROUP_WORLD_SIZE"] == "3" for r in recs), recs
by_id = sorted(recs, key=lambda r: int(r["node"][1:]))
assert [r["GROUP_RANK"] for r in by_id] == ["0", "1", "2"], by_id  # compact, in SLURM_NODEID order
PYEOF
  for k in 0 1 2 3; do
    [[ $k == "$VICTIM" ]] && continue
    out=$W/agent-$k.out
    grep -q "budget" "$out" && { tail -20 "$out"; fail "node $k: a restart was charged"; }
    lost="sent no heartbeat|lost its connection to the rendezvous store"
    [[ $VICTIM == 0 ]] && lost="lost the rendezvous store hosted by the agent"
    grep -qE "$lost" "$out" || { tail -20 "$out"; fail "node $k does not name the lost node"; }
    grep -q "ddprun: error" "$out" && { tail -20 "$out"; fail "node $k failed"; }
  done
  grep -E "task [0-9]+: Exited" "$W/srun.out" && fail "a surviving agent exited non-zero"
  if [[ $VICTIM == 0 ]]; then
    grep -q "this node hosts the rendezvous store now" "$W/agent-1.out" ||
      { tail -20 "$W/agent-1.out"; fail "node 1 did not take over the rendezvous store"; }
  fi
  echo "node $VICTIM lost: a world of 3 after $((t2 - t1)) ms, no restart spent"
  ;;
*) fail "unknown mode" ;;
esac
echo "PASS ($MODE, rendezvous $RDZV)"
