#!/usr/bin/env bash
# Stops the etcd started by start_etcd.sh from $ETCD_CI_DIR (/tmp/etcd-ci), by its pid file:
# SIGTERM, SIGKILL after 10 s (a zombie counts as exited). Keeps the data dir unless --purge.
#
#   scripts/ci/stop_etcd.sh            # data survives; start_etcd.sh resumes on it
#   scripts/ci/stop_etcd.sh --purge    # also removes $ETCD_CI_DIR
set -euo pipefail
CI_NAME=stop_etcd
HERE=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
# shellcheck source=common.sh
. "$HERE/common.sh"

DIR=${ETCD_CI_DIR:-/tmp/etcd-ci}
[[ "$DIR" == /* && "$DIR" != / ]] || ci_die "ETCD_CI_DIR must be an absolute path, got '$DIR'"
if [[ "${ETCD_CI_LOCKED:-0}" != 1 ]]; then
  mkdir -p "$(dirname "$DIR")"
  exec 9>"$DIR.lock"
  flock -w 60 9 || ci_die "could not lock $DIR.lock within 60s"
fi

ci_stop_pid "$(ci_read_pid "$DIR/etcd.pid")" "$DIR" etcd
rm -f "$DIR/etcd.pid" "$DIR/params"
if [[ "${1:-}" == --purge ]]; then
  rm -rf "$DIR"
fi
exit 0
