#!/usr/bin/env bash
# End-to-end through the launcher: ddprun --standalone runs two `train` workers over Gloo.
#  1. rank 1 fails at step 30 in generation 0; the agent restarts the group, which resumes from
#     the step-20 checkpoint and finishes below the loss threshold.
#  2. a checkpoint written by 2 workers is resumed by 3 (the rest of the epoch is re-sharded).
# Exits 77 (skipped) when ddprun has not been built.
set -euo pipefail
BIN=${DDP_BIN_DIR:?}
SRC=${DDP_SOURCE_DIR:?}
TMP=${DDP_TEST_TMP:?}
PY=/usr/bin/python3
[[ -x "$BIN/ddprun" && -x "$BIN/train" ]] || { echo "ddprun or train not built: skipping"; exit 77; }
export PATH="$BIN:$PATH"
rm -rf "$TMP"/*
fail() { echo "FAIL: $*" >&2; exit 1; }

"$BIN/train" make-data --out "$TMP/data" --samples 8000 --features 32 --classes 4 --shards 2 --seed 1

# 1. elastic restart + resume
timeout 150 "$BIN/ddprun" --standalone --nproc-per-node=2 --max-restarts=2 \
  train --config "$SRC/configs/quickstart.json" --data "$TMP/data" \
  --checkpoint-dir "$TMP/ckpt1" --metrics "$TMP/m1.jsonl" --fail-at-step 30 --fail-rank 1 \
  > "$TMP/run1.log" 2>&1 || { tail -30 "$TMP/run1.log"; fail "restart run exited $?"; }
grep -q "injected failure: rank 1 stops at step 30" "$TMP/run1.log" || fail "no injected failure in the log"
grep -q "resuming from .* at step 20" "$TMP/run1.log" || fail "generation 1 did not resume from step 20"
$PY - "$TMP/m1.jsonl" <<'PYEOF' || fail "metrics of the restart run"
import json, sys
lines = [json.loads(l) for l in open(sys.argv[1])]
gen1 = [l for l in lines if l["generation"] == 1]
assert gen1, "no generation-1 metrics"
assert gen1[0]["step"] > 20, f"generation 1 started over: {gen1[0]}"
assert lines[-1]["loss"] < 0.5, f"final loss {lines[-1]['loss']}"
assert lines[-1]["world_size"] == 2
print("restart run: final", lines[-1])
PYEOF

# 2. two workers write a checkpoint mid-epoch, three resume it
timeout 150 "$BIN/ddprun" --standalone --nproc-per-node=2 \
  train --config "$SRC/configs/quickstart.json" --data "$TMP/data" \
  --checkpoint-dir "$TMP/ckpt2" --metrics "$TMP/m2.jsonl" --max-steps 50 \
  > "$TMP/run2.log" 2>&1 || { tail -30 "$TMP/run2.log"; fail "2-worker run exited $?"; }
timeout 150 "$BIN/ddprun" --standalone --nproc-per-node=3 \
  train --config "$SRC/configs/quickstart.json" --data "$TMP/data" \
  --checkpoint-dir "$TMP/ckpt2" --metrics "$TMP/m2.jsonl" \
  > "$TMP/run3.log" 2>&1 || { tail -30 "$TMP/run3.log"; fail "3-worker run exited $?"; }
grep -q "resuming from .* at step 50 (epoch 0, written by world size 2)" "$TMP/run3.log" \
  || fail "3 workers did not resume the 2-worker checkpoint"
$PY - "$TMP/m2.jsonl" <<'PYEOF' || fail "metrics of the 2 -> 3 run"
import json, sys
lines = [json.loads(l) for l in open(sys.argv[1])]
three = [l for l in lines if l["world_size"] == 3]
assert three and three[0]["step"] > 50, "3-worker run did not continue after step 50"
assert three[-1]["epoch"] == 4 and three[-1]["loss"] < 0.5, f"3-worker final {three[-1]}"
print("2 -> 3 run: final", three[-1])
PYEOF
echo "PASS"
