#!/usr/bin/env bash
# The test command: installs what is missing, builds, runs the whole CTest suite, then builds the
# store and server tests again with AddressSanitizer + UndefinedBehaviorSanitizer in a second, small
# tree (${DDP_SANITIZE_BUILD_DIR:-build-sanitize}: only those targets) and runs them.
# Extra arguments go to the first ctest (e.g. -L unit, -R store). DDP_SANITIZE_TESTS=0 skips the
# sanitizer tree.
set -euo pipefail
cd "$(dirname "$0")/.."
./scripts/setup.sh
./scripts/build.sh
BUILD_DIR=${DDP_BUILD_DIR:-build}
ctest --test-dir "$BUILD_DIR" -j "${DDP_TEST_JOBS:-2}" --output-on-failure "$@"

[ "${DDP_SANITIZE_TESTS:-1}" = "0" ] && exit 0
SANITIZE_DIR=${DDP_SANITIZE_BUILD_DIR:-build-sanitize}
SANITIZE_TESTS=(
  rendezvous_wire_codec_test rendezvous_wire_codec_resume_test
  rendezvous_store_server_test rendezvous_store_server_on_close_test
  rendezvous_store_server_bounds_test rendezvous_store_server_state_test
  rendezvous_tcp_store_client_test rendezvous_tcp_store_client_extension_test
)
start=$(date +%s)
cmake -S . -B "$SANITIZE_DIR" -DCMAKE_BUILD_TYPE=RelWithDebInfo -DDDP_WITH_CUDA=OFF \
  -DDDP_SANITIZE=address,undefined >/dev/null
cmake --build "$SANITIZE_DIR" -j "${DDP_JOBS:-$(nproc)}" --target "${SANITIZE_TESTS[@]}"
regex="^($(IFS='|'; echo "${SANITIZE_TESTS[*]}"))$"
ASAN_OPTIONS=${ASAN_OPTIONS:-detect_leaks=1} \
UBSAN_OPTIONS=${UBSAN_OPTIONS:-halt_on_error=1:print_stacktrace=1} \
  ctest --test-dir "$SANITIZE_DIR" -j "${DDP_TEST_JOBS:-2}" --output-on-failure -R "$regex"
echo "test.sh: sanitizer tree built and run in $(($(date +%s) - start)) s"
