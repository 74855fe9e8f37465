#!/usr/bin/env bash
# The test command: installs what is missing, builds, runs the whole CTest suite.
# Extra arguments go to ctest (e.g. -L unit, -R store).
set -euo pipefail
cd "$(dirname "$0")/.."
./scripts/setup.sh
./scripts/build.sh
BUILD_DIR=${DDP_BUILD_DIR:-build}
ctest --test-dir "$BUILD_DIR" -j "${DDP_TEST_JOBS:-2}" --output-on-failure "$@"
