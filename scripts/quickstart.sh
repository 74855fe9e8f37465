#!/usr/bin/env bash
# The main job in one command: install what is missing, build, then run a standalone ddprun
# training job — two Gloo workers on a CPU machine, one NCCL worker per GPU where GPUs exist.
set -euo pipefail
cd "$(dirname "$0")/.."
./scripts/setup.sh
./scripts/build.sh
BIN=${DDP_BUILD_DIR:-build}/bin
WORK=${DDP_QUICKSTART_DIR:-$(mktemp -d /tmp/ddprun-quickstart.XXXXXX)}
mkdir -p "$WORK"

echo "== making a small synthetic dataset in $WORK/data"
"$BIN/train" make-data --out "$WORK/data" --samples 20000 --features 32 --classes 4 --shards 4 --seed 1

echo "== ddprun --standalone --nproc-per-node=auto train --config configs/quickstart.json"
PATH="$PWD/$BIN:$PATH" "$BIN/ddprun" --standalone --nproc-per-node=auto \
  train --config configs/quickstart.json --data "$WORK/data" \
  --checkpoint-dir "$WORK/ckpt" --metrics "$WORK/metrics.jsonl"

echo "== done: metrics in $WORK/metrics.jsonl, checkpoint in $WORK/ckpt"
tail -n 1 "$WORK/metrics.jsonl"
