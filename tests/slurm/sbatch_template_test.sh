#!/usr/bin/env bash
# scripts/slurm/ddprun.sbatch without a cluster: its #SBATCH lines ask for no GPU and no CPU count
# (so it runs as shipped on a CPU-only cluster), and the srun line it builds (seen through a stub
# srun) asks for GPU workers and CPUs only when the job got them.
set -euo pipefail
SRC=${DDP_SOURCE_DIR:?}
TMP=${DDP_TEST_TMP:?}
T=$SRC/scripts/slurm/ddprun.sbatch
W=$TMP/sbatch-template
rm -rf "$W" && mkdir -p "$W"
fail() { echo "FAIL: $*" >&2; exit 1; }

bad=$(grep -E '^#SBATCH.*(gres|gpu|cpus-per-task|mem)' "$T" || true)
[[ -z "$bad" ]] || fail "the template asks for resources a CPU-only cluster may not have: $bad"
grep -q '^#SBATCH --signal=USR1@' "$T" || fail "the template lost its pre-emption warning"

cat >"$W/srun" <<'STUB'
#!/bin/bash
printf '%s\n' "$@" >"$STUB_OUT"
STUB
chmod +x "$W/srun"

# run_template OUT [VAR=VALUE...]: the batch script under a minimal allocation environment.
run_template() {
  local out=$1; shift
  env -i PATH="$PATH" SRUN="$W/srun" STUB_OUT="$out" SLURM_JOB_ID=7 SLURM_JOB_NUM_NODES=4 \
    SLURM_JOB_NODELIST='n[1-4]' "$@" bash "$T" --max-steps 5 >"$out.log" 2>&1 ||
    fail "the template failed: $(cat "$out.log")"
}

run_template "$W/cpu"
grep -qx -- '--nproc-per-node=1' "$W/cpu" || fail "CPU-only: want one worker per node: $(cat "$W/cpu")"
grep -q -- '--cpus-per-task' "$W/cpu" && fail "CPU-only: no --cpus-per-task asked, none expected"
grep -qx -- '--signals-to-handle=SIGTERM,SIGINT,SIGUSR1' "$W/cpu" || fail "no USR1 in --signals-to-handle"
[[ $(tail -3 "$W/cpu" | tr '\n' ' ') == "configs/quickstart.json --max-steps 5 " ]] ||
  fail "extra arguments do not reach train: $(cat "$W/cpu")"

run_template "$W/gpu" SLURM_GPUS_ON_NODE=8 SLURM_CPUS_PER_TASK=32
[[ $(head -1 "$W/gpu") == --cpus-per-task=32 ]] || fail "GPU job: want --cpus-per-task=32 for srun: $(cat "$W/gpu")"
grep -qx -- '--nproc-per-node=gpu' "$W/gpu" || fail "GPU job: want a worker per GPU: $(cat "$W/gpu")"

run_template "$W/fixed" SLURM_GPUS_ON_NODE=8 NPROC_PER_NODE=2
grep -qx -- '--nproc-per-node=2' "$W/fixed" || fail "NPROC_PER_NODE is not honoured: $(cat "$W/fixed")"

# After the step: which exit codes requeue the job (scontrol requeue) and which do not. The stub
# srun exits $STUB_RC; the stub scontrol records its arguments; the stub sinfo lists the nodes in
# $STUB_NODES ("n1 allocated" lines).
cat >"$W/srun-rc" <<'STUB'
#!/bin/bash
exit "${STUB_RC:-0}"
STUB
cat >"$W/scontrol" <<'STUB'
#!/bin/bash
echo "$*" >>"$STUB_REQUEUED"
STUB
cat >"$W/sinfo" <<'STUB'
#!/bin/bash
printf '%b' "${STUB_NODES:-}"
STUB
chmod +x "$W/srun-rc" "$W/scontrol" "$W/sinfo"
# requeue_case NAME RC WANT_RC WANT_REQUEUE [VAR=VALUE...]
requeue_case() {
  local name=$1 rc=$2 want_rc=$3 want=$4 got=0
  shift 4
  rm -f "$W/$name.requeued"
  env -i PATH="$PATH" SRUN="$W/srun-rc" SCONTROL="$W/scontrol" SINFO="$W/sinfo" STUB_RC="$rc" \
    STUB_REQUEUED="$W/$name.requeued" SLURM_JOB_ID=7 SLURM_JOB_NUM_NODES=4 \
    SLURM_JOB_NODELIST='n[1-4]' "$@" bash "$T" >"$W/$name.log" 2>&1 || got=$?
  [[ $got == "$want_rc" ]] || fail "$name: the template exited $got, want $want_rc: $(cat "$W/$name.log")"
  if [[ $want == yes ]]; then
    [[ "$(cat "$W/$name.requeued" 2>/dev/null)" == "requeue 7" ]] ||
      fail "$name: want 'scontrol requeue 7': $(cat "$W/$name.log")"
  else
    [[ ! -e "$W/$name.requeued" ]] || fail "$name: requeued, want not: $(cat "$W/$name.log")"
  fi
}
requeue_case success 0 0 no
requeue_case verdict 87 87 no STUB_NODES='n1 allocated\nn2 down*\n'   # never, not even with a lost node
grep -q "verdict (exit 87).*not requeued" "$W/verdict.log" || fail "verdict: no line saying why: $(cat "$W/verdict.log")"
requeue_case sigterm 143 143 yes
grep -q "pre-emption; requeueing job 7 (requeue 1 of 3)" "$W/sigterm.log" || fail "sigterm: $(cat "$W/sigterm.log")"
requeue_case storelost 86 86 yes
requeue_case nodelost 1 1 yes STUB_NODES='n1 allocated\nn2 allocated\nn3 down*\nn4 allocated\n'
grep -q "node(s) lost: n3 (exit 1)" "$W/nodelost.log" || fail "nodelost: $(cat "$W/nodelost.log")"
requeue_case failed 1 1 no STUB_NODES='n1 allocated\nn2 allocated\nn3 allocated\nn4 allocated\n'
requeue_case exhausted 143 143 no SLURM_RESTART_COUNT=3
requeue_case off 143 143 no MAX_REQUEUES=0
echo PASS
