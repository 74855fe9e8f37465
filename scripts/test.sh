#!/usr/bin/env bash
# The test command: installs what is missing, builds, runs the whole CTest suite, then builds the
# store and server tests (label `sanitize`) again with AddressSanitizer + UndefinedBehaviorSanitizer
# in a second, small tree (${DDP_SANITIZE_BUILD_DIR:-build-sanitize}: only those targets) and runs
# them.
# Extra arguments go to the first ctest (e.g. -L unit, -R store). DDP_SANITIZE_TESTS=0 skips the
# sanitizer tree; DDP_STORM_TESTS=1 adds the fault storms (label storm), DDP_LONG_TESTS=1 the
# issues' full-size runs (label long). The package test (label
# package) builds the .deb in build-package and installs it in a Debian 12 root (skipped, exit 77,
# without the Debian mirror). DDP_TEST_JOBS: tests
# run at once (default 2). Prints the build's time (every target, the tests included), the
# suite's, and the total.
set -euo pipefail
cd "$(dirname "$0")/.."
all=$SECONDS
./scripts/setup.sh
./scripts/build.sh
BUILD_DIR=${DDP_BUILD_DIR:-build}
suite=$SECONDS
rc=0
# The fault storms (label storm, scripts/ci/storm.py) run with DDP_STORM_TESTS=1 and in
# scripts/ci/soak.sh, alone after the suite: minutes of faults each, a stress run rather than a
# check, whose faults would land among the suite's parallel tests here.
# The issues' full-size runs (label long: the PyTorch job's 100 kills, 8 minutes) with
# DDP_LONG_TESTS=1.
left_out=()
[ "${DDP_STORM_TESTS:-0}" = "1" ] || left_out+=(storm)
[ "${DDP_LONG_TESTS:-0}" = "1" ] || left_out+=(long)
exclude=()
[ ${#left_out[@]} -eq 0 ] || exclude=(-LE "$(IFS='|'; echo "${left_out[*]}")")
ctest --test-dir "$BUILD_DIR" -j "${DDP_TEST_JOBS:-2}" --output-on-failure "${exclude[@]}" "$@" || rc=$?
echo "== test suite: $((SECONDS - suite)) s; test.sh so far: $((SECONDS - all)) s (exit $rc)"
[ "$rc" = "0" ] || exit $rc

[ "${DDP_SANITIZE_TESTS:-1}" = "0" ] && exit 0
SANITIZE_DIR=${DDP_SANITIZE_BUILD_DIR:-build-sanitize}
start=$(date +%s)
# Unoptimised with line-level debug info: a third of the compile time of -O2, and nothing
# optimised away from the sanitizers' view; the tests themselves take seconds either way.
cmake -S . -B "$SANITIZE_DIR" -DCMAKE_BUILD_TYPE=Debug -DCMAKE_CXX_FLAGS_DEBUG="-O0 -g1" \
  -DDDP_WITH_CUDA=OFF -DDDP_SANITIZE=address,undefined >/dev/null
# The tests labelled `sanitize` (cmake/DdpTest.cmake): the wire codec, server and store clients.
cmake --build "$SANITIZE_DIR" -j "${DDP_JOBS:-$(nproc)}" --target ddp_sanitize_tests
ASAN_OPTIONS=${ASAN_OPTIONS:-detect_leaks=1} \
UBSAN_OPTIONS=${UBSAN_OPTIONS:-halt_on_error=1:print_stacktrace=1} \
  ctest --test-dir "$SANITIZE_DIR" -j "${DDP_TEST_JOBS:-2}" --output-on-failure -L sanitize
echo "test.sh: sanitizer tree built and run in $(($(date +%s) - start)) s"
echo "== test.sh: $((SECONDS - all)) s in all"
