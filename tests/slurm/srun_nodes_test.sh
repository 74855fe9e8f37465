#!/usr/bin/env bash
# `srun -N4 --ntasks-per-node=1 env` on the CI cluster gives 4 tasks with SLURM_NODEID 0..3, one
# per node n1..n4.
#   srun_nodes_test.sh netns   # the slurm_cluster fixture's cluster: each node also has its own
#                              # hostname and IP, and the first node's name resolves on every node
#   srun_nodes_test.sh plain   # starts its own loopback cluster and stops it again (trap)
set -euo pipefail
MODE=${1:?usage: srun_nodes_test.sh netns|plain}
CI=${DDP_SOURCE_DIR:?}/scripts/ci
fail() { echo "FAIL: $*" >&2; exit 1; }

if [[ "$MODE" == plain ]]; then
  trap '"$CI/stop_slurm.sh" --purge' EXIT
  "$CI/start_slurm.sh"
fi
. "${SLURM_CI_DIR:?}/env"

out=$(timeout -k 5 60 srun -N4 --ntasks-per-node=1 -l env) || fail "srun env failed (rc $?)"
nodeids=$(grep -oE '^[0-9]+: SLURM_NODEID=[0-9]+' <<<"$out" | sed 's/.*=//' | sort -n | tr '\n' ' ')
[[ "$nodeids" == "0 1 2 3 " ]] || fail "SLURM_NODEID values '$nodeids', want '0 1 2 3 '"
names=$(grep -oE '^[0-9]+: SLURMD_NODENAME=.*' <<<"$out" | sed 's/.*=//' | sort | tr '\n' ' ')
[[ "$names" == "n1 n2 n3 n4 " ]] || fail "SLURMD_NODENAME values '$names', want 'n1 n2 n3 n4 '"
for task in 0 1 2 3; do
  line=$(grep -E "^$task: SLURM_NODEID=" <<<"$out") || fail "task $task printed no SLURM_NODEID"
  [[ "$line" == "$task: SLURM_NODEID=$task" ]] || fail "task $task: $line"
done
grep -q '^0: SLURM_JOB_NODELIST=n\[1-4\]$' <<<"$out" || fail "SLURM_JOB_NODELIST is not n[1-4]"

if [[ "$MODE" == netns ]]; then
  # Own hostname and IP per node; n1 (the rendezvous host under Slurm) resolves everywhere.
  hosts=$(timeout -k 5 60 srun -N4 --ntasks-per-node=1 -l bash -c \
    'echo "$(hostname) $(hostname -I | tr -d " ") $(getent hosts n1 | cut -d" " -f1)"' | sort) ||
    fail "srun hostname failed"
  i=1
  while read -r _ host ip first; do
    [[ "$host" == "n$i" ]] || fail "task $((i - 1)) runs on host '$host', want n$i"
    [[ "$ip" == "${SLURM_CI_NETNS_SUBNET:?}.$i" ]] || fail "n$i has IP '$ip'"
    [[ "$first" == "$SLURM_CI_NETNS_SUBNET.1" ]] || fail "n1 resolves to '$first' on n$i"
    i=$((i + 1))
  done <<<"$hosts"
  [[ $i == 5 ]] || fail "got $((i - 1)) task lines: $hosts"
fi
echo "PASS: 4 tasks, SLURM_NODEID 0..3 on n1..n4 ($MODE)"
