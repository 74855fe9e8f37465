#!/usr/bin/env bash
# Runs the store fuzzer (tests/fuzz/store_fuzz.cpp: the wire codec and the server's connection
# state machine, under ASan + UBSan + LeakSanitizer) for SECONDS (default 60), starting from the
# seed corpus in tests/fuzz/corpus/. New inputs it finds go to a scratch copy, not into the repo;
# a crash or leak leaves its input in $DDP_FUZZ_ARTIFACTS (default build/fuzz/artifacts) and fails.
#
# Usage: scripts/fuzz.sh [SECONDS]
#   DDP_FUZZ_BIN       the harness (default: build/fuzz/bin/store_fuzz, built by the normal build)
#   DDP_FUZZ_JOBS      parallel fuzzing processes (default 1)
# Prints libFuzzer's final stats, and one line: "fuzz: N runs in S s, 0 crashes, 0 leaks".
set -euo pipefail

ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
SECONDS_TO_RUN=${1:-60}
BIN=${DDP_FUZZ_BIN:-$ROOT/build/fuzz/bin/store_fuzz}
ARTIFACTS=${DDP_FUZZ_ARTIFACTS:-$(dirname "$(dirname "$BIN")")/artifacts}
JOBS=${DDP_FUZZ_JOBS:-1}

if [ ! -x "$BIN" ]; then
  echo "fuzz: $BIN not found; build first (./scripts/build.sh builds it when clang and libFuzzer" \
    "are installed: scripts/setup.sh)" >&2
  exit 1
fi
WORK=$(mktemp -d)
trap 'rm -rf "$WORK"' EXIT
mkdir -p "$WORK/corpus" "$ARTIFACTS"
cp "$ROOT"/tests/fuzz/corpus/* "$WORK/corpus/"

LOG="$WORK/fuzz.log"
status=0
ASAN_OPTIONS=${ASAN_OPTIONS:-detect_leaks=1:allocator_may_return_null=0} \
UBSAN_OPTIONS=${UBSAN_OPTIONS:-halt_on_error=1:print_stacktrace=1} \
  "$BIN" "$WORK/corpus" -max_total_time="$SECONDS_TO_RUN" -timeout=20 -rss_limit_mb=2048 \
  -max_len=65536 -print_final_stats=1 $([ "$JOBS" -gt 1 ] && echo "-jobs=$JOBS -workers=$JOBS") \
  -artifact_prefix="$ARTIFACTS/" >"$LOG" 2>&1 || status=$?
# With -jobs the workers log to fuzz-N.log in the current directory.
cat "$LOG" fuzz-*.log 2>/dev/null | grep -E "^(stat::|==|SUMMARY|INFO: (Running|Loaded|seed))|ERROR|runtime error|crash|leak" | tail -40 || true
runs=$(grep -h "stat::number_of_executed_units" "$LOG" | awk '{s += $2} END {print s + 0}')
crashes=$(cat "$LOG" fuzz-*.log 2>/dev/null |
  grep -cE "ERROR: (AddressSanitizer|UndefinedBehaviorSanitizer|libFuzzer)|runtime error:" || true)
leaks=$(cat "$LOG" fuzz-*.log 2>/dev/null | grep -c "ERROR: LeakSanitizer" || true)
rm -f fuzz-*.log
echo "fuzz: $runs runs in $SECONDS_TO_RUN s, $crashes crashes, $leaks leaks (exit $status)"
[ "$status" -eq 0 ]
