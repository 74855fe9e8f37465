#!/usr/bin/env bash
# The test command: installs what is missing, builds, runs the whole CTest suite.
# Extra arguments go to ctest (e.g. -L unit, -R store). DDP_TEST_JOBS: tests run at once
# (default 2). Prints the build's time (every target, the tests included) and the suite's.
set -euo pipefail
cd "$(dirname "$0")/.."
start=$SECONDS
./scripts/setup.sh
./scripts/build.sh
BUILD_DIR=${DDP_BUILD_DIR:-build}
suite=$SECONDS
rc=0
ctest --test-dir "$BUILD_DIR" -j "${DDP_TEST_JOBS:-2}" --output-on-failure "$@" || rc=$?
echo "== test suite: $((SECONDS - suite)) s; test.sh: $((SECONDS - start)) s in all (exit $rc)"
exit $rc
