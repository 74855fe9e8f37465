#!/usr/bin/env bash
# A worker for launcher tests on real services (Slurm, etcd, Kubernetes env): prints one line with
# what ddprun gave it, then (optionally) waits for a go-file so a test can act mid-job.
#
#   WORKER rank=R local=L world=W group=G groups=GW restart=N run=ID host=H master=A:P \
#          master_ip=IP reach=0|1 pid=PID agent=PPID
#
# reach=1 when a TCP connection to MASTER_ADDR:MASTER_PORT (the worker store) succeeds from here.
# Env knobs (set by the test, inherited through ddprun):
#   DDP_TEST_MARK_DIR  write $DIR/started.<rank> (pid and agent pid) when started
#   DDP_TEST_GO_FILE   then wait until this file exists (DDP_TEST_GO_TIMEOUT s, default 60; rc 3
#                      on timeout)
#   DDP_TEST_TRAP      a signal name (USR1, TERM): on it, write $DIR/signal.<rank> and exit 0
set -u
master_ip=$(getent hosts "${MASTER_ADDR:-}" 2>/dev/null | awk '{print $1; exit}')
reach=0
if timeout 5 bash -c 'exec 3<>"/dev/tcp/$0/$1"' "${MASTER_ADDR:-}" "${MASTER_PORT:-0}" 2>/dev/null; then
  reach=1
fi
echo "WORKER rank=${RANK:-} local=${LOCAL_RANK:-} world=${WORLD_SIZE:-} group=${GROUP_RANK:-}" \
  "groups=${GROUP_WORLD_SIZE:-} restart=${TORCHELASTIC_RESTART_COUNT:-} run=${TORCHELASTIC_RUN_ID:-}" \
  "host=$(hostname) master=${MASTER_ADDR:-}:${MASTER_PORT:-} master_ip=${master_ip:-none}" \
  "reach=$reach pid=$$ agent=$PPID"

if [[ -n "${DDP_TEST_TRAP:-}" ]]; then
  trap 'echo "$$ $PPID" >"$DDP_TEST_MARK_DIR/signal.$RANK"; exit 0' "$DDP_TEST_TRAP"
fi
if [[ -n "${DDP_TEST_MARK_DIR:-}" ]]; then
  echo "$$ $PPID" >"$DDP_TEST_MARK_DIR/.started.$RANK"   # hidden until complete
  mv "$DDP_TEST_MARK_DIR/.started.$RANK" "$DDP_TEST_MARK_DIR/started.$RANK"
fi
if [[ -n "${DDP_TEST_GO_FILE:-}" ]]; then
  deadline=$((SECONDS + ${DDP_TEST_GO_TIMEOUT:-60}))
  until [[ -e "$DDP_TEST_GO_FILE" ]]; do
    ((SECONDS < deadline)) || { echo "rank $RANK: no go-file $DDP_TEST_GO_FILE" >&2; exit 3; }
    # short sleeps in the background + wait, so a trapped signal is handled at once
    sleep 0.05 & wait $!
  done
fi
exit 0
