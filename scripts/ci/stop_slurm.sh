#!/usr/bin/env bash
# Stops the cluster started by start_slurm.sh from $SLURM_CI_DIR (/tmp/slurm-ci), by pid file:
# cancels every job (waits up to 10 s for the queue to drain), then SIGTERM to each slurmd,
# slurmctld and munged (SIGKILL after 10 s; zombies count as exited), then stray job steps and
# tasks of this cluster, then the private cgroup mount and the network namespaces.
#
#   scripts/ci/stop_slurm.sh            # keeps $SLURM_CI_DIR (logs in $SLURM_CI_DIR/log)
#   scripts/ci/stop_slurm.sh --purge    # also removes $SLURM_CI_DIR
#
# Safe to run when nothing runs. Exit status 0 unless a process survived SIGKILL.
set -euo pipefail
CI_NAME=stop_slurm
HERE=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
# shellcheck source=common.sh
. "$HERE/common.sh"

DIR=${SLURM_CI_DIR:-/tmp/slurm-ci}
PURGE=0
[[ "${1:-}" == --purge ]] && PURGE=1
[[ "$DIR" == /* && "$DIR" != / ]] || ci_die "SLURM_CI_DIR must be an absolute path, got '$DIR'"
RUN=$DIR/run
export SLURM_CONF=$DIR/etc/slurm.conf

if [[ "${SLURM_CI_LOCKED:-0}" != 1 ]]; then
  mkdir -p "$(dirname "$DIR")"
  exec 9>"$DIR.lock"
  flock -w 60 9 || ci_die "could not lock $DIR.lock within 60s"
fi

pid_of() { ci_read_pid "$RUN/$1.pid"; }

# Jobs first, so slurmstepd and the tasks end by themselves.
ctld=$(pid_of slurmctld)
if [[ -n "$ctld" ]] && ci_pid_owned "$ctld" "$DIR"; then
  jobs=$(timeout 10 squeue -h -o %i 2>/dev/null || true)
  if [[ -n "$jobs" ]]; then
    # shellcheck disable=SC2086
    timeout 10 scancel $jobs 2>/dev/null || true
    deadline=$(( $(ci_now_ms) + 10000 ))
    while [[ -n "$(timeout 5 squeue -h -o %i 2>/dev/null || true)" ]] && (( $(ci_now_ms) < deadline )); do
      sleep 0.05
    done
  fi
fi

shopt -s nullglob
for f in "$RUN"/slurmd-*.pid; do
  ci_stop_pid "$(ci_read_pid "$f")" "$DIR" "$(basename "$f" .pid)"
  rm -f "$f"
done
ci_stop_pid "$ctld" "$DIR" slurmctld
rm -f "$RUN/slurmctld.pid"
ci_stop_pid "$(pid_of munged)" "$DIR" munged
rm -f "$RUN/munged.pid"

# Strays: slurmstepd (marked with SLURM_CI_OWNER by start_slurm.sh) and tasks of our jobs (they
# carry SLURM_CONF of this cluster and a SLURM_JOB_ID). Never ourselves or our ancestors.
ancestors=" "
p=$$
while [[ "$p" =~ ^[0-9]+$ ]] && (( p > 1 )); do
  ancestors+="$p "
  p=$(awk '{print $4}' "/proc/$p/stat" 2>/dev/null || echo 0)
done
owned=$(grep -lzxF "SLURM_CI_OWNER=$DIR" /proc/[0-9]*/environ 2>/dev/null || true)
for envf in $(grep -lzxF "SLURM_CONF=$DIR/etc/slurm.conf" /proc/[0-9]*/environ 2>/dev/null || true); do
  grep -qz '^SLURM_JOB_ID=' "$envf" 2>/dev/null && owned+=" $envf"
done
for envf in $owned; do
  pid=${envf#/proc/}; pid=${pid%/environ}
  [[ "$ancestors" == *" $pid "* ]] && continue
  if ci_pid_alive "$pid"; then
    ci_log "stray process $pid ($(tr '\0' ' ' <"/proc/$pid/cmdline" 2>/dev/null | head -c 80)): SIGKILL"
    kill -KILL "$pid" 2>/dev/null || true
  fi
done

if [[ -f "$RUN/cgroup.mounted" ]]; then
  cg=$(cat "$RUN/cgroup.mounted")
  umount "$cg/systemd" 2>/dev/null || umount -l "$cg/systemd" 2>/dev/null || true
  umount "$cg" 2>/dev/null || umount -l "$cg" 2>/dev/null || true
  rm -f "$RUN/cgroup.mounted"
fi

if [[ -f "$RUN/netns.names" || -f "$RUN/netns.bridge" ]]; then
  for ns in $(cat "$RUN/netns.names" 2>/dev/null); do "$HERE/netns.sh" del "$ns" || true; done
  [[ -f "$RUN/netns.bridge" ]] && "$HERE/netns.sh" bridge-down "$(cat "$RUN/netns.bridge")"
  "$HERE/netns.sh" tidy || true
  rm -f "$RUN/netns.names" "$RUN/netns.bridge"
fi
rm -f "$RUN/params"

if (( PURGE == 1 )); then
  rm -rf "$DIR"
fi
exit 0
