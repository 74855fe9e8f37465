#!/usr/bin/env bash
# Allreduce bandwidth through our Communicator (ddp::GlooCommunicator) vs calling gloo::allreduce
# directly on the same Gloo context: 2 ranks (threads, loopback TCP), float32 sizes 4 KiB .. 64 MiB,
# alternating order, median of REPS repetitions. Prints a markdown table with the ratio
# (goal >= 95%). Builds the `allreduce_bench` target first.
#
# usage: scripts/bench/allreduce_vs_gloo.sh [build-dir]      (default: build)
# env:   REPS=11 RANKS=2 MIN_KIB=4 MAX_MIB=64 JOBS=2
set -euo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)"
BUILD="${1:-$ROOT/build}"
if [[ ! -f "$BUILD/CMakeCache.txt" ]]; then
  cmake -S "$ROOT" -B "$BUILD" -DCMAKE_BUILD_TYPE=Release > /dev/null
fi
cmake --build "$BUILD" -j"${JOBS:-2}" --target allreduce_bench > /dev/null
BIN="$(find "$BUILD" -type f -name allreduce_bench -perm -u+x | head -n1)"
[[ -n "$BIN" ]] || { echo "allreduce_bench was not built under $BUILD" >&2; exit 2; }
exec "$BIN" --ranks "${RANKS:-2}" --reps "${REPS:-11}" --min-kib "${MIN_KIB:-4}" \
  --max-mib "${MAX_MIB:-64}"
