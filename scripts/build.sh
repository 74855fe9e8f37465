#!/usr/bin/env bash
# Configures and builds ddprun into ${DDP_BUILD_DIR:-build}. Extra arguments go to cmake's
# configure step (e.g. -DDDP_WITH_CUDA=OFF).
#
#   DDP_BUILD_TARGETS  build only these targets and what they link (e.g. ddp_programs: ddprun,
#                      ddprund and train, as the quick start does; targets named together build
#                      one after another); empty: every target, the tests included
#   DDP_JOBS           parallel compile jobs (default: the number of CPUs)
#   DDP_BUILD_TYPE     CMAKE_BUILD_TYPE (default RelWithDebInfo)
#
# CMake compiles through ccache when it is installed (DDP_CCACHE, cmake/DdpBuildSpeed.cmake).
# The last line printed is the time configure + build took.
set -euo pipefail
cd "$(dirname "$0")/.."
BUILD_DIR=${DDP_BUILD_DIR:-build}
JOBS=${DDP_JOBS:-$(nproc)}
start=$SECONDS
cmake -S . -B "$BUILD_DIR" -DCMAKE_BUILD_TYPE=${DDP_BUILD_TYPE:-RelWithDebInfo} "$@" >/dev/null
targets=()
for t in ${DDP_BUILD_TARGETS:-}; do
  targets+=(--target "$t")
done
cmake --build "$BUILD_DIR" -j "$JOBS" "${targets[@]}"
launcher=$(sed -n 's/^DDP_COMPILER_LAUNCHER:INTERNAL=//p' "$BUILD_DIR/CMakeCache.txt")
echo "== build: $((SECONDS - start)) s (${DDP_BUILD_TARGETS:-all targets}; -j $JOBS;" \
  "launcher: ${launcher:-none}${CCACHE_DISABLE:+, CCACHE_DISABLE set})"
