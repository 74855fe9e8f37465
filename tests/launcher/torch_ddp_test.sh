#!/usr/bin/env bash
# A real PyTorch 1.13 DDP script (Gloo, CPU) under `ddprun --nproc-per-node=2`: once clean, and
# once crashing on rank 1 in its first attempt and completing from the checkpoint after a restart.
set -euo pipefail
DDPRUN="$DDP_BIN_DIR/ddprun"
SCRIPT="$DDP_SOURCE_DIR/tests/launcher/train_ddp.py"
TMP="${DDP_TEST_TMP:-/tmp}/torch_ddp_$$"
rm -rf "$TMP" && mkdir -p "$TMP/clean" "$TMP/crash"
trap 'rm -rf "$TMP"' EXIT
export PYTHON_EXEC=/usr/bin/python3

fail() { echo "FAIL: $*" >&2; exit 1; }
field() { /usr/bin/python3 -c "import json,sys; print(json.load(open(sys.argv[1]))[sys.argv[2]])" "$1" "$2"; }

echo "== clean run"
"$DDPRUN" --standalone --nproc-per-node=2 "$SCRIPT" "$TMP/clean" --epochs 2 \
  >"$TMP/clean.out" 2>"$TMP/clean.err" || { cat "$TMP/clean.err" >&2; fail "clean run exited $?"; }
[ -f "$TMP/clean/checkpoint.pt" ] || fail "no checkpoint written"
[ "$(field "$TMP/clean/result.json" world)" = 2 ] || fail "world size"
[ "$(field "$TMP/clean/result.json" attempt)" = 0 ] || fail "clean run restarted"
[ "$(field "$TMP/clean/result.json" consistent)" = True ] || fail "ranks disagree on parameters"

echo "== crash on the first attempt, restart, resume"
"$DDPRUN" --standalone --nproc-per-node=2 --max-restarts=1 --shutdown-timeout=10 \
  "$SCRIPT" "$TMP/crash" --epochs 3 --crash-rank 1 --crash-attempt 0 --crash-epoch 1 \
  >"$TMP/crash.out" 2>"$TMP/crash.err" || { cat "$TMP/crash.err" >&2; fail "crash run exited $?"; }
grep -q "restarting the job" "$TMP/crash.err" || { cat "$TMP/crash.err" >&2; fail "no restart logged"; }
grep -q "injected crash on rank 1" "$TMP/crash.err" || fail "the crash's traceback did not reach the console"
[ "$(field "$TMP/crash/result.json" attempt)" = 1 ] || fail "did not finish on attempt 1"
[ "$(field "$TMP/crash/result.json" start_epoch)" = 1 ] || fail "did not resume from the checkpoint"
[ "$(field "$TMP/crash/result.json" consistent)" = True ] || fail "ranks disagree after the restart"
echo "PASS"
