#!/usr/bin/env bash
# Configures and builds ddprun into ${DDP_BUILD_DIR:-build}. Extra arguments go to cmake's
# configure step (e.g. -DDDP_WITH_CUDA=OFF).
set -euo pipefail
cd "$(dirname "$0")/.."
BUILD_DIR=${DDP_BUILD_DIR:-build}
JOBS=${DDP_JOBS:-$(nproc)}
cmake -S . -B "$BUILD_DIR" -DCMAKE_BUILD_TYPE=${DDP_BUILD_TYPE:-RelWithDebInfo} "$@" >/dev/null
cmake --build "$BUILD_DIR" -j "$JOBS"
