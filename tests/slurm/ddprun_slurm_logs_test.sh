#!/usr/bin/env bash
# 4 Slurm nodes (the slurm_cluster fixture) share one --log-dir, as on a shared filesystem:
#   srun -N4 ddprun --nproc-per-node=2 --log-dir=DIR --tee=3 --max-restarts=1 train ... with rank 2
#   failing at step 10 in generation 0. Each node writes below DIR/<run id>/node_<its rank>/ and no
#   node removes another's files, so after the restart every node's logs of both generations and
#   rank 2's error file are there, and the job completes.
# Every process started here is found by pid (and by a marker in its environment) and stopped.
set -euo pipefail
BIN=${DDP_BIN_DIR:?}
TMP=${DDP_TEST_TMP:?}
. "${SLURM_CI_DIR:?}/env"
W=$TMP/logs
rm -rf "$W" && mkdir -p "$W"
fail() { echo "FAIL: $*" >&2; exit 1; }

export DDP_SLURM_TEST_MARK="ddp-slurm-logs-$$-$RANDOM"
marked_pids() {
  local p
  for p in /proc/[0-9]*; do
    p=${p#/proc/}
    [[ "$p" == "$$" || "$p" == "$BASHPID" ]] && continue
    grep -qzx "DDP_SLURM_TEST_MARK=$DDP_SLURM_TEST_MARK" "/proc/$p/environ" 2>/dev/null && echo "$p"
  done
  return 0
}
cleanup() {
  local rc=$? pid
  for pid in $(marked_pids); do kill -KILL "$pid" 2>/dev/null || true; done
  exit "$rc"
}
trap cleanup EXIT

"$BIN/train" make-data --out "$W/data" --samples 2000 --features 8 --classes 2 --shards 4 --seed 5 >/dev/null
cat >"$W/config.json" <<EOF
{"data": "$W/data", "hidden": [16], "epochs": 1, "batch_size": 16, "max_steps": 20,
 "log_every": 1000, "progress_seconds": 1000}
EOF
timeout -k 5 120 srun -N4 --ntasks-per-node=1 "$BIN/ddprun" --nproc-per-node=2 --max-restarts=1 \
  --log-dir "$W/shared" --tee=3 "$BIN/train" --config "$W/config.json" \
  --fail-at-step 10 --fail-rank 2 >"$W/srun.log" 2>&1 || { tail -40 "$W/srun.log"; fail "srun ddprun exited $?"; }
grep -q "cannot" "$W/srun.log" && { grep "cannot" "$W/srun.log"; fail "a node could not use the log dir"; }
run=$(ls "$W/shared")
[[ $(wc -w <<<"$run") == 1 ]] || fail "want one run dir, have: $run"
nodes=$(ls "$W/shared/$run" | tr '\n' ' ')
[[ "$nodes" == "node_0 node_1 node_2 node_3 " ]] || fail "node folders: $nodes"
for node in 0 1 2 3; do
  for attempt in 0 1; do
    for lr in 0 1; do
      d=$W/shared/$run/node_$node/attempt_$attempt/$lr
      [[ -f $d/stdout.log && -f $d/stderr.log ]] || fail "missing logs in $d: $(find "$W/shared" | sort)"
    done
  done
  grep -q "training" "$W/shared/$run/node_$node/attempt_1/0/stderr.log" ||
    [[ $node != 0 ]] || fail "node 0's generation-1 rank 0 log is empty"
done
grep -q "injected failure: rank 2" "$W/shared/$run/node_1/attempt_0/0/error.json" ||
  fail "rank 2's error file of generation 0 is gone"
echo "4 nodes, one log dir, 2 generations: $(find "$W/shared" -type f | wc -l) files in place"
