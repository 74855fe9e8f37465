#!/usr/bin/env bash
# scripts/slurm/ddprun-srun builds the right srun line (--dry-run, no cluster needed) and rejects
# bad usage with exit status 2 and a one-line reason.
set -euo pipefail
SRC=${DDP_SOURCE_DIR:?}
WRAP=$SRC/scripts/slurm/ddprun-srun
fail() { echo "FAIL: $*" >&2; exit 1; }
export DDPRUN=/bin/true
unset SLURM_JOB_ID SLURM_JOB_NUM_NODES

# expect_line WANT ARGS...: the printed srun line (stderr) is WANT and the exit status 0.
expect_line() {
  local want=$1 got
  shift
  got=$("$WRAP" --dry-run "$@" 2>&1) || fail "ddprun-srun $* exited $?: $got"
  [[ "$got" == "$want" ]] || fail "ddprun-srun $*:"$'\n'"  got  $got"$'\n'"  want $want"
}
# expect_usage PATTERN ARGS...: exit status 2 and PATTERN in the message.
expect_usage() {
  local pattern=$1 got rc=0
  shift
  got=$("$WRAP" "$@" 2>&1) || rc=$?
  [[ $rc == 2 ]] || fail "ddprun-srun $*: exit $rc, want 2 ($got)"
  grep -q -- "$pattern" <<<"$got" || fail "ddprun-srun $*: no '$pattern' in: $got"
}

new="ddprun-srun: running as a new job: srun --nodes=4 --ntasks-per-node=1"
expect_line "$new /bin/true train --config c.json" -N 4 -- train --config c.json
expect_line "$new /bin/true train" -N4 -- train
expect_line "$new /bin/true train" --nodes=4 -- train
expect_line "$new --gpus-per-node=8 -p gpu --time=60 /bin/true --nproc-per-node=8 --max-restarts=3 train a\\ b" \
  -N 4 --gpus-per-node 8 -p gpu --time=60 -- --max-restarts=3 train "a b"
# an explicit --nproc-per-node wins over the GPU count
expect_line "$new --gpus-per-node=8 /bin/true --nproc-per-node=2 train" -N 4 --gpus-per-node=8 -- --nproc-per-node=2 train
expect_line "$new /bin/true train" -N 4 --ntasks-per-node=1 -- train
# inside an allocation: a step, and -N defaults to the allocation's nodes
got=$(SLURM_JOB_ID=42 SLURM_JOB_NUM_NODES=3 "$WRAP" --dry-run -- train 2>&1)
[[ "$got" == "ddprun-srun: running as a step of job 42: srun --nodes=3 --ntasks-per-node=1 /bin/true train" ]] ||
  fail "inside an allocation: $got"

expect_usage "missing '--'" -N 4 train
expect_usage "missing '--'" -N 4 --
expect_usage "-N NODES is required outside a Slurm allocation" -- train
expect_usage "wants a positive integer" -N 0 -- train
expect_usage "wants a positive integer" -N 4 --gpus-per-node x -- train
expect_usage "one agent per node" -N 4 -n 8 -- train
expect_usage "one agent per node" -N 4 --ntasks-per-node=2 -- train
expect_usage "exactly one agent per node" -N 4 --ntasks-per-node 2 -- train
expect_usage "needs a value" -N
DDPRUN=/nonexistent/ddprun expect_usage "ddprun not found" -N 2 -- train
"$WRAP" --help | grep -q "ddprun-srun -N 4 \[--gpus-per-node G\]" || fail "--help"
echo "PASS"
