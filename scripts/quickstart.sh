#!/usr/bin/env bash
# The main job in one command: install what is missing, build, then run a standalone ddprun
# training job — two Gloo workers on a CPU machine, one NCCL worker per GPU where GPUs exist.
#
# The dataset goes where configs/quickstart.json looks (its "data" key, relative to the repository
# root), so the README's usage examples run as written afterwards. Metrics, TensorBoard events and
# the checkpoint go to build/quickstart/ (the checkpoint is cleared first: each quick start trains
# afresh; earlier metrics and events are cleared too).
#
# Only what the job needs is built (ddprun, ddprund, train and the libraries they link); the tests
# are built by scripts/test.sh. The build's time is printed, and the time from the start of this
# script to the end of the job.
set -euo pipefail
cd "$(dirname "$0")/.."
start=$SECONDS
./scripts/setup.sh
DDP_BUILD_TARGETS=ddp_programs ./scripts/build.sh  # ddprun, ddprund and train, side by side
BIN=${DDP_BUILD_DIR:-build}/bin
CONFIG=configs/quickstart.json
# The one place the data goes: the config's own "data" key.
DATA=$(/usr/bin/python3 -c 'import json, sys; print(json.load(open(sys.argv[1]))["data"])' "$CONFIG")
OUT=build/quickstart
CKPT=$OUT/ckpt

echo "== making a small synthetic dataset in $DATA"
"$BIN/train" make-data --out "$DATA" --samples 20000 --features 32 --classes 4 --shards 4 --seed 1

echo "== ddprun --standalone --nproc-per-node=auto train --config $CONFIG"
rm -rf "$CKPT" "$OUT/metrics.jsonl" "$OUT/tensorboard"
PATH="$PWD/$BIN:$PATH" "$BIN/ddprun" --standalone --nproc-per-node=auto \
  train --config "$CONFIG" --checkpoint-dir "$CKPT" --metrics "$OUT/metrics.jsonl" \
  --tensorboard-dir "$OUT/tensorboard"

echo "== done: metrics in $OUT/metrics.jsonl, TensorBoard events in $OUT/tensorboard," \
  "checkpoint in $CKPT"
tail -n 1 "$OUT/metrics.jsonl"
echo "== quick start: $((SECONDS - start)) s in all (setup, build, data, training)"
