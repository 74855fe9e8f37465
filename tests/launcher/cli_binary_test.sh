#!/bin/sh
# The real ddprun binary: --help and --version exit 0; usage errors print one line and exit 2.
set -u
bin="$DDP_BIN_DIR/ddprun"
tmp="${DDP_TEST_TMP:-/tmp}"
fail() { echo "FAIL: $*"; exit 1; }

out=$("$bin" --version) || fail "--version exited $?"
case "$out" in "ddprun "[0-9]*) ;; *) fail "--version printed '$out'" ;; esac

"$bin" --help > "$tmp/help.txt" || fail "--help exited $?"
for flag in --nproc-per-node --nnodes --rdzv-endpoint --standalone --tee --signals-to-handle; do
  grep -q -- "$flag" "$tmp/help.txt" || fail "--help does not mention $flag"
done

expect_usage_error() {  # expect_usage_error <message substring> [VAR=value...] <args...>
  want="$1"; shift
  env "$@" > "$tmp/out.txt" 2> "$tmp/err.txt"; rc=$?
  [ "$rc" -eq 2 ] || fail "$* exited $rc, want 2 (stderr: $(cat "$tmp/err.txt"))"
  [ "$(wc -l < "$tmp/err.txt")" -eq 1 ] || fail "$*: want one line, got: $(cat "$tmp/err.txt")"
  grep -q -- "^ddprun: error: .*$want" "$tmp/err.txt" || fail "$*: got $(cat "$tmp/err.txt")"
  [ ! -s "$tmp/out.txt" ] || fail "$* wrote to stdout: $(cat "$tmp/out.txt")"
}
expect_usage_error "unrecognized argument: --bogus" "$bin" --bogus train.py
expect_usage_error "--nnodes '4:2'" "$bin" --nnodes=4:2 train.py
expect_usage_error "--tee '7'" "$bin" --tee=7 train.py
expect_usage_error "PET_NPROC_PER_NODE 'lots'" PET_NPROC_PER_NODE=lots "$bin" train.py
expect_usage_error "training script, module or program is missing" "$bin" --nproc-per-node=2
echo PASS
