#!/usr/bin/env bash
# Makes docs/status-page.png, the screenshot docs/status.md shows: the status page test's 2-node job
# (ddprund + two agents running `train`; rank 1 fails in generation 0, the job restarts) as
# headless Chromium renders ddprund's page (tests/integration/status_page_test.py page).
#
# Usage: scripts/status_page_screenshot.sh     (BUILD_DIR: build folder, default build)
set -euo pipefail
ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
BUILD_DIR=${BUILD_DIR:-$ROOT/build}
cmake --build "$BUILD_DIR" -j2 --target ddp_programs >/dev/null
WORK=$(mktemp -d)
trap 'rm -rf "$WORK"' EXIT
DDP_BIN_DIR="$BUILD_DIR/bin" DDP_SOURCE_DIR="$ROOT" DDP_TEST_TMP="$WORK" \
  DDP_STATUS_SCREENSHOT="$ROOT/docs/status-page.png" \
  /usr/bin/python3 "$ROOT/tests/integration/status_page_test.py" page
echo "wrote $ROOT/docs/status-page.png"
