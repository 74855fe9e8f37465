#!/usr/bin/env bash
# soak.sh N [ctest args]: runs the whole CTest suite N times with CPU hogs beside it, the way a
# busy 2-core CI machine runs it. Builds first (scripts/build.sh). Prints one line per round and a
# tally; exits 1 when any round failed. Like scripts/test.sh it leaves out the label `long`. The
# failing rounds' ctest output is kept in $BUILD_DIR/soak/round-<i>.log.
#
# Each round also runs the short storm (scripts/ci/storm.py, the CTest entries labelled `storm`)
# on its own after the suite, with the hogs still running, so that its faults do not land among
# the suite's parallel tests; each storm's p99 recovery line is printed under the round's line.
#
#   DDP_SOAK_HOGS   CPU hog processes (default: the number of CPUs)
#   DDP_SOAK_LOAD   percent load of each hog (default 70)
#   DDP_SOAK_STORM  0: no storm in the rounds (default 1)
#
# The hogs are stress-ng workers, bounded by a timeout and stopped by pid on every exit path.
set -euo pipefail
cd "$(dirname "$0")/../.."
ROUNDS=${1:?usage: soak.sh N [ctest args]}
shift
BUILD_DIR=${DDP_BUILD_DIR:-build}
HOGS=${DDP_SOAK_HOGS:-$(nproc)}
LOAD=${DDP_SOAK_LOAD:-70}
command -v stress-ng >/dev/null || ./scripts/setup.sh
./scripts/build.sh
mkdir -p "$BUILD_DIR/soak"

hog_pid=""
stop_hogs() {
  if [ -n "$hog_pid" ]; then
    kill -TERM "$hog_pid" 2>/dev/null || true
    wait "$hog_pid" 2>/dev/null || true
    hog_pid=""
  fi
}
trap stop_hogs EXIT
trap 'stop_hogs; exit 130' INT TERM

failed=0
for ((i = 1; i <= ROUNDS; i++)); do
  # One bounded hog per round (never outlives a round by more than its timeout).
  stress-ng --cpu "$HOGS" --cpu-load "$LOAD" --timeout 3600s --quiet &
  hog_pid=$!
  log="$BUILD_DIR/soak/round-$i.log"
  start=$(date +%s)
  status=passed
  if ! ctest --test-dir "$BUILD_DIR" -j "${DDP_TEST_JOBS:-2}" --output-on-failure -LE "storm|long" "$@" \
      >"$log" 2>&1; then
    status=FAILED
  fi
  if [ "${DDP_SOAK_STORM:-1}" != 0 ] &&
      ! ctest --test-dir "$BUILD_DIR" -V -L storm >>"$log" 2>&1; then
    status=FAILED
  fi
  [ "$status" = passed ] || failed=$((failed + 1))
  stop_hogs
  summary=$(grep -E 'tests passed|tests failed' "$log" | tr '\n' ' ' || true)
  echo "soak round $i/$ROUNDS: $status in $(($(date +%s) - start)) s (${HOGS} hogs at ${LOAD}%): $summary"
  grep -E 'recovery p99' "$log" | sed 's/^ */    storm /' || true
  if [ "$status" = FAILED ]; then
    grep -E '^\s+[0-9]+ - |storm: (PASS|FAIL)' "$log" | sed 's/^/    /' || true
  else
    rm -f "$log"
  fi
done
echo "soak: $((ROUNDS - failed)) of $ROUNDS rounds passed"
[ "$failed" -eq 0 ]
