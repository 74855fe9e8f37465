#!/usr/bin/env bash
# The overhead of progress beats (worker_runtime's reportProgress with compute times, what
# straggler detection reads) at 1 ms steps: tests/bench/beats_bench.cpp runs alternating blocks of
# fixed-work steps with and without a beat after each, under a real agent
# (ddprun --standalone --straggler-threshold 1.5, so the beats reach its FIFO and are parsed and
# judged), and prints the median ratio of adjacent with/without blocks (goal: < 1 % overhead at
# 1 ms steps) and the direct cost of a beat call in ns. Builds ddprun and beats_bench first.
#
# usage: scripts/bench/beats.sh [build-dir]      (default: build)
# env:   STEP_US=1000 STEPS=200 BLOCKS=100 JOBS=1
set -euo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)"
BUILD="${1:-$ROOT/build}"
if [[ ! -f "$BUILD/CMakeCache.txt" ]]; then
  cmake -S "$ROOT" -B "$BUILD" -DCMAKE_BUILD_TYPE=RelWithDebInfo > /dev/null
fi
cmake --build "$BUILD" -j"${JOBS:-1}" --target ddprun beats_bench > /dev/null
BENCH="$(find "$BUILD" -type f -name beats_bench -perm -u+x | head -n1)"
[[ -n "$BENCH" ]] || { echo "beats_bench was not built under $BUILD" >&2; exit 2; }
exec "$BUILD/bin/ddprun" --standalone --nproc-per-node 1 --straggler-threshold 1.5 \
  --log-level warn --no-python "$BENCH" --step-us "${STEP_US:-1000}" \
  --steps "${STEPS:-200}" --blocks "${BLOCKS:-100}"
