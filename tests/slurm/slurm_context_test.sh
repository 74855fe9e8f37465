#!/usr/bin/env bash
# SlurmContext against the environment real Slurm sets (the slurm_cluster fixture, 4 nodes):
# every task of `srun -N4 --ntasks-per-node=1` derives nnodes 4, its own node rank, first host n1,
# run id <job>.<step> and the documented port; a step on a subset (-w n[3-4]) sees only its nodes.
set -euo pipefail
DUMP=${1:?usage: slurm_context_test.sh PATH/slurm_context_dump}
fail() { echo "FAIL: $*" >&2; exit 1; }
. "${SLURM_CI_DIR:?}/env"

out=$(timeout -k 5 60 srun -N4 --ntasks-per-node=1 -l bash -c \
  "echo job=\$SLURM_JOB_ID step=\$SLURM_STEP_ID nodeid=\$SLURM_NODEID \$('$DUMP')") ||
  fail "srun failed: $out"
echo "$out"
[[ $(wc -l <<<"$out") == 4 ]] || fail "want 4 task lines"
while read -r _ job step nodeid line; do
  job=${job#job=}; step=${step#step=}; nodeid=${nodeid#nodeid=}
  port=$((29600 + (job % 1000 + 389 * (step % 1000)) % 1000))
  want="inSlurm=1 inStep=1 nnodes=4 nodeRank=$nodeid localTask=0 firstHost=n1 runId=$job.$step port=$port hosts=n1,n2,n3,n4"
  [[ "$line" == "$want" ]] || fail "got '$line', want '$want'"
done <<<"$out"

out=$(timeout -k 5 60 srun -N2 -w 'n[3-4]' --ntasks-per-node=1 -l "$DUMP" | sort) || fail "srun -w failed"
echo "$out"
grep -q '^0: .* nnodes=2 nodeRank=0 .*firstHost=n3 .*hosts=n3,n4$' <<<"$out" || fail "subset step, task 0"
grep -q '^1: .* nnodes=2 nodeRank=1 .*firstHost=n3 .*hosts=n3,n4$' <<<"$out" || fail "subset step, task 1"
echo "PASS"
