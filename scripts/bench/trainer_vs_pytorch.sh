#!/usr/bin/env bash
# `ddprun train` (Gloo + OpenBLAS) vs torchrun + PyTorch 1.13 DDP (gloo) on CPU, side by side:
# the same synthetic dataset, MLP, per-rank batch, SGD (momentum 0.9) and number of steps, at 1 and
# 2 workers (OMP_NUM_THREADS=1 each). Samples/s are all ranks' samples from step WARMUP to the
# end divided by that wall time (ours: from the metrics file's `time` field; PyTorch: the script's
# own timer). Prints a markdown table with the ratio (goal >= 1.5x) and the scaling efficiency
# (samples/s at 2 workers / (2 x samples/s at 1 worker)).
#
# usage: scripts/bench/trainer_vs_pytorch.sh [build-dir]      (default: build)
# env:   STEPS=300 BATCH=128 HIDDEN=512,512 FEATURES=128 CLASSES=10 SAMPLES=65536 WORKERS="1 2"
#        SHM_ALLREDUCE=true (false: our gradients over Gloo/TCP like PyTorch's, not shared memory)
set -euo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)"
BUILD="${1:-$ROOT/build}"
STEPS="${STEPS:-300}" BATCH="${BATCH:-128}" HIDDEN="${HIDDEN:-512,512}" WARMUP=20
FEATURES="${FEATURES:-128}" CLASSES="${CLASSES:-10}" SAMPLES="${SAMPLES:-65536}"
WORKERS="${WORKERS:-1 2}" SHM_ALLREDUCE="${SHM_ALLREDUCE:-true}"
PY=/usr/bin/python3
for b in ddprun train; do
  [[ -x "$BUILD/bin/$b" ]] || { echo "missing $BUILD/bin/$b (build it first)" >&2; exit 2; }
done
WORK="$(mktemp -d)"
trap 'rm -rf "$WORK"' EXIT
export PATH="$BUILD/bin:$PATH" DDP_LOG_LEVEL=warn LOGLEVEL=WARNING OMP_NUM_THREADS=1

"$BUILD/bin/train" make-data --out "$WORK/data" --samples "$SAMPLES" --features "$FEATURES" \
  --classes "$CLASSES" --shards 4 --seed 1 > /dev/null
cat > "$WORK/bench.json" <<JSON
{"data": "$WORK/data", "hidden": [${HIDDEN}], "device": "cpu", "epochs": 1000,
 "max_steps": $STEPS, "batch_size": $BATCH, "optimizer": "sgd", "lr": 0.05, "momentum": 0.9,
 "log_every": $WARMUP, "progress_seconds": 1e9, "checkpoint_every": 0,
 "shm_allreduce": $SHM_ALLREDUCE}
JSON

ours() {  # workers -> samples/s
  local n=$1 m="$WORK/ours-$1.jsonl"
  rm -f "$m"
  ddprun --standalone --nproc-per-node="$n" train --config "$WORK/bench.json" --metrics "$m" \
    > "$WORK/ours-$n.log" 2>&1 || { tail -20 "$WORK/ours-$n.log" >&2; exit 1; }
  $PY - "$m" "$BATCH" "$n" <<'PYEOF'
import json, sys
lines = [json.loads(l) for l in open(sys.argv[1])]
first, last = lines[0], lines[-1]
print((last["step"] - first["step"]) * int(sys.argv[2]) * int(sys.argv[3]) / (last["time"] - first["time"]))
PYEOF
}

theirs() {  # workers -> samples/s
  local n=$1
  $PY -m torch.distributed.run --standalone --nproc_per_node="$n" --redirects=1 --tee=1 \
    "$ROOT/tests/bench/trainer_torch_ddp.py" --data "$WORK/data" --hidden "$HIDDEN" \
    --batch-size "$BATCH" --steps "$STEPS" --warmup "$WARMUP" > "$WORK/torch-$n.log" 2>&1 \
    || { tail -20 "$WORK/torch-$n.log" >&2; exit 1; }
  grep samples_per_s "$WORK/torch-$n.log" | sed 's/^[^{]*//' | $PY -c 'import json,sys; print(json.loads(sys.stdin.readline())["samples_per_s"])'
}

LOAD_BEFORE="$(cut -d' ' -f1-3 /proc/loadavg)"
declare -A OURS THEIRS
for n in $WORKERS; do
  OURS[$n]=$(ours "$n")
  THEIRS[$n]=$(theirs "$n")
done
echo "MLP ${FEATURES}-${HIDDEN//,/-}-${CLASSES}, batch ${BATCH}/rank, ${STEPS} steps (timed after ${WARMUP}), $(nproc --all) CPUs, shm_allreduce ${SHM_ALLREDUCE}, load before: $LOAD_BEFORE, after: $(cut -d' ' -f1-3 /proc/loadavg)"
echo
echo "| workers | ddprun train samples/s | torchrun + PyTorch DDP samples/s | ratio (goal >= 1.5) |"
echo "|---|---|---|---|"
for n in $WORKERS; do
  $PY -c "print(f'| $n | {${OURS[$n]}:.0f} | {${THEIRS[$n]}:.0f} | {${OURS[$n]}/${THEIRS[$n]}:.2f}x |')"
done
if [[ -n "${OURS[1]:-}" && -n "${OURS[2]:-}" ]]; then
  $PY -c "print(f'\nscaling efficiency 1 -> 2 workers: ours {${OURS[2]}/(2*${OURS[1]}):.0%}, PyTorch {${THEIRS[2]}/(2*${THEIRS[1]}):.0%}')"
fi
