#!/bin/sh
# The real ddprun binary: --help and --version exit 0 (ddprund's --version too); usage errors print one line and exit 2.
set -u
bin="$DDP_BIN_DIR/ddprun"
tmp="${DDP_TEST_TMP:-/tmp}"
fail() { echo "FAIL: $*"; exit 1; }

# --version (ddprun and ddprund): the version, the commit this tree is at, the dialects.
commit=$(git -C "$DDP_SOURCE_DIR" rev-parse --short=12 HEAD 2>/dev/null || echo unknown)
for prog in ddprun ddprund; do
  out=$("$DDP_BIN_DIR/$prog" --version) || fail "$prog --version exited $?"
  case "$out" in "$prog "[0-9]*) ;; *) fail "$prog --version printed '$out'" ;; esac
  echo "$out" | grep -q "^commit $commit" || fail "$prog --version: no 'commit $commit' in '$out'"
  echo "$out" | grep -qx "torch TCPStore dialects: 1.13/2.0 (v1a), 2.1 (v1b), 2.2+ (v2)" ||
    fail "$prog --version: no dialects in '$out'"
done

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
# --virtual-local-rank with fewer visible devices than workers: refused before any worker starts.
want="--virtual-local-rank: local rank 1 has no visible device (CUDA_VISIBLE_DEVICES=5 lists 1)$"
expect_usage_error "$want" \
  CUDA_VISIBLE_DEVICES=5 "$bin" --standalone --nproc-per-node=2 --virtual-local-rank \
  touch "$tmp/worker-started"
[ ! -e "$tmp/worker-started" ] || fail "--virtual-local-rank refused, but a worker started"
CUDA_VISIBLE_DEVICES=5,7 "$bin" --nproc-per-node=2 --virtual-local-rank --dry-run x > /dev/null ||
  fail "--virtual-local-rank with 2 devices for 2 workers exited $?"
# A CPU host without CUDA_VISIBLE_DEVICES is not refused (each worker gets its local rank).
if ! ls /dev/nvidia[0-9]* > /dev/null 2>&1; then
  env -u CUDA_VISIBLE_DEVICES "$bin" --nproc-per-node=2 --virtual-local-rank --dry-run x \
    > /dev/null || fail "--virtual-local-rank on a CPU host exited $?"
fi
echo PASS
