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
echo PASS
