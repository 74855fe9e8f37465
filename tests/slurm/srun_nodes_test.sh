#!/usr/bin/env bash
# `srun -N4 --ntasks-per-node=1 env` on the CI cluster gives 4 tasks with SLURM_NODEID 0..3, one
# per node n1..n4.
#   srun_nodes_test.sh netns   # the slurm_cluster fixture's cluster: each node also has its own
#                              # hostname and IP, and the first node's name resolves on every node
#   srun_nodes_test.sh plain   # starts its own loopback cluster; stopping it with a job running
#                              # leaves no process behind (trap stops it on failure too)
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
if [[ "$MODE" == plain ]]; then
  # Stopping the cluster while a job runs leaves no task, step daemon or Slurm daemon behind.
  alive() { local s; s=$(cat "/proc/$1/stat" 2>/dev/null) || return 1; s=${s##*) }; [[ ${s:0:1} != Z ]]; }
  log=$(mktemp)
  srun -N2 --ntasks-per-node=1 bash -c 'echo TASKPID $$; exec sleep 300' >"$log" 2>&1 &
  srun_pid=$!
  for _ in $(seq 600); do [[ $(grep -c TASKPID "$log") == 2 ]] && break; sleep 0.05; done
  tasks=$(awk '/TASKPID/ {print $2}' "$log")
  [[ $(wc -w <<<"$tasks") == 2 ]] || fail "job did not start: $(cat "$log")"
  daemons=$(cat "$SLURM_CI_DIR"/run/*.pid)
  echo "stopping with job tasks $(echo $tasks) running; daemons $(echo $daemons)"
  "$CI/stop_slurm.sh"
  for pid in $tasks $daemons; do
    for _ in $(seq 200); do alive "$pid" || break; sleep 0.05; done
    alive "$pid" && fail "pid $pid ($(tr '\0' ' ' </proc/$pid/cmdline)) survived stop_slurm.sh"
  done
  for _ in $(seq 200); do alive "$srun_pid" || break; sleep 0.05; done
  alive "$srun_pid" && fail "srun (pid $srun_pid) still runs after the cluster stopped"
  wait "$srun_pid" 2>/dev/null || true
  rm -f "$log"
fi
echo "PASS: 4 tasks, SLURM_NODEID 0..3 on n1..n4 ($MODE)"
