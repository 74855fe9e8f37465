#!/usr/bin/env bash
# The `train` binary as a user meets it: make-data, a single-process run without the env contract,
# metrics/TensorBoard/checkpoint outputs, and one-line errors with exit code 2 for bad input.
set -uo pipefail
BIN=${DDP_BIN_DIR:?}
SRC=${DDP_SOURCE_DIR:?}
TMP=${DDP_TEST_TMP:?}
rm -rf "${TMP:?}"/*
fail() { echo "FAIL: $*" >&2; exit 1; }
unset RANK WORLD_SIZE MASTER_ADDR MASTER_PORT

"$BIN/train" make-data --out "$TMP/data" --samples 3000 --features 16 --classes 3 --shards 3 --seed 2 \
  || fail "make-data exited $?"
[[ -f "$TMP/data/index.json" && -f "$TMP/data/shard-00002.bin" ]] || fail "make-data outputs missing"

cat > "$TMP/cfg.json" <<JSON
{"data": "$TMP/data", "hidden": [32], "epochs": 2, "batch_size": 32, "lr": 0.01,
 "tensorboard_dir": "$TMP/tb", "log_every": 10, "checkpoint_every": 50}
JSON
"$BIN/train" --config "$TMP/cfg.json" --metrics "$TMP/m.jsonl" --checkpoint-dir "$TMP/ckpt" \
  > "$TMP/out.txt" 2> "$TMP/err.txt" || { cat "$TMP/err.txt"; fail "single-process run exited $?"; }
grep -q "^\[train\] epoch 2 step 188/188" "$TMP/out.txt" || { cat "$TMP/out.txt"; fail "no final progress line"; }
[[ -f "$TMP/ckpt/checkpoint.bin" ]] || fail "no checkpoint"
ls "$TMP"/tb/events.out.tfevents.* > /dev/null 2>&1 || fail "no TensorBoard event file"
# --tensorboard-dir overrides the config's, and each run writes an events file of its own.
for run in 1 2; do
  "$BIN/train" --config "$TMP/cfg.json" --max-steps 10 --tensorboard-dir "$TMP/tb2" > /dev/null 2>&1 ||
    fail "--tensorboard-dir run exited $?"
done
[[ $(ls "$TMP"/tb2/events.out.tfevents.* | wc -l) == 2 ]] || fail "want 2 event files in tb2: $(ls "$TMP/tb2")"
/usr/bin/python3 - "$TMP/m.jsonl" <<'PYEOF' || fail "metrics lines"
import json, sys
lines = [json.loads(l) for l in open(sys.argv[1])]
assert lines[-1]["step"] == 188 and lines[-1]["world_size"] == 1 and lines[-1]["generation"] == 0
assert lines[-1]["loss"] < lines[0]["loss"], "loss did not go down"
PYEOF
# A rerun resumes from the final checkpoint and has nothing left to do.
"$BIN/train" --config "$TMP/cfg.json" --checkpoint-dir "$TMP/ckpt" > /dev/null 2> "$TMP/err2.txt" \
  || fail "rerun exited $?"
grep -q "resuming from .* at step 188 (epoch 2" "$TMP/err2.txt" || { cat "$TMP/err2.txt"; fail "rerun did not resume"; }
# ... and says so, instead of a loss and a speed it did not measure ("loss 0.0000, 0 samples/s").
grep -q "done: 188 steps, epoch 2, no step in this run (it resumed from the final checkpoint), params crc32c" \
  "$TMP/err2.txt" || { cat "$TMP/err2.txt"; fail "the rerun's last line"; }

# cuBLAS is loaded only for a model on a CUDA device (trainer/cuda_module.hpp): a CPU run never
# maps it (loading it costs a process about 0.4 s of CPU and 215 MB). A build with CUDA (the module
# beside bin/) loads it for device "cuda", and without a GPU that is the model's one-line error.
LD_DEBUG=files "$BIN/train" --config "$TMP/cfg.json" --max-steps 2 > /dev/null 2> "$TMP/ld.txt" \
  || fail "CPU run under LD_DEBUG exited $?"
grep -q "file=libcublas" "$TMP/ld.txt" && fail "a CPU run loaded cuBLAS: $(grep -m1 'file=libcublas' "$TMP/ld.txt")"
grep -q "file=libopenblas\|file=libdnnl" "$TMP/ld.txt" || fail "LD_DEBUG=files listed nothing (the check above proves nothing)"
if [[ -f "$BIN/../lib/libddp_train_cuda.so" ]]; then
  sed 's/"hidden"/"device": "cuda", "hidden"/' "$TMP/cfg.json" > "$TMP/cuda.json"
  LD_DEBUG=files "$BIN/train" --config "$TMP/cuda.json" --max-steps 2 > /dev/null 2> "$TMP/ld.txt"
  rc=$?
  grep -q "file=libcublas" "$TMP/ld.txt" || fail "device cuda did not load the CUDA model's cuBLAS"
  if (( rc != 0 )); then  # no GPU here: the model says so (exit 2), not a loader error
    [[ $rc -eq 2 ]] && grep -q "no CUDA device is visible" "$TMP/ld.txt" \
      || { grep -v '^ *[0-9]*:' "$TMP/ld.txt"; fail "device cuda without a GPU: exit $rc"; }
  fi
fi

expect_config_error() {  # pattern command...
  local pattern=$1; shift
  "$@" > /dev/null 2> "$TMP/e.txt"
  local rc=$?
  [[ $rc -eq 2 ]] || { cat "$TMP/e.txt"; fail "expected exit 2, got $rc: $*"; }
  grep -q -- "$pattern" "$TMP/e.txt" || { cat "$TMP/e.txt"; fail "expected '$pattern' in the error"; }
}
expect_config_error "not found" "$BIN/train" --config "$TMP/missing.json"
expect_config_error "index.json" "$BIN/train" --config "$TMP/cfg.json" --data "$TMP/nowhere"
truncate -s 100 "$TMP/data/shard-00001.bin"
expect_config_error "shard-00001.bin: 100 bytes, expected .* (truncated)" "$BIN/train" --config "$TMP/cfg.json"
echo '{"data": "x", "batchsize": 4}' > "$TMP/typo.json"
expect_config_error "unknown key 'batchsize'" "$BIN/train" --config "$TMP/typo.json"
expect_config_error "" "$BIN/train" make-data --out "$TMP/d2" --samples 10 --features 0 --classes 3 --shards 1
echo PASS
