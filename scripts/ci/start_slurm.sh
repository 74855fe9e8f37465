#!/usr/bin/env bash
# Starts a private Slurm cluster for tests: munged + slurmctld + N slurmd on this host, as root,
# without systemd, everything under $SLURM_CI_DIR, handled by pid files. Idempotent: a healthy
# cluster started with the same parameters is reused. See docs/deploy.md#slurm (tests on real
# Slurm).
#
#   scripts/ci/start_slurm.sh                                   # 1 node named after this host
#   SLURM_CI_NODES=4 SLURM_CI_CPUS=4 scripts/ci/start_slurm.sh  # nodes n1..n4 (4 slurmd)
#   SLURM_CI_NETNS=1 SLURM_CI_NODES=4 scripts/ci/start_slurm.sh # n1..n4 each in its own network
#                          # namespace with its own IP, hostname and /etc/hosts (§C2)
#   . /tmp/slurm-ci/env; srun -N4 --ntasks-per-node=1 env
#   scripts/ci/stop_slurm.sh --purge
#
# Knobs (defaults): SLURM_CI_DIR (/tmp/slurm-ci), SLURM_CI_NODES (1), SLURM_CI_CPUS (8),
# SLURM_CI_MEM_MB (4096), SLURM_CI_CTLD_PORT (26817), SLURM_CI_SLURMD_PORT (27001; node i uses
# +i-1), SLURM_CI_AUTH (munge|none), SLURM_CI_TIMEOUT (30 s), SLURM_CI_HOST (auto: this host's
# short name if it resolves, else localhost), SLURM_CI_PRIVATE_CGROUP (auto|1|0),
# SLURM_CI_NETNS (0|1), SLURM_CI_NETNS_SUBNET (10.213.0: node i = .i, controller = .254),
# SLURM_CI_NETNS_PREFIX (slurmci: namespaces slurmci1..N, bridge slurmci-br).
# Exit status 0 when every node is idle; on failure everything started is stopped again and the
# logs stay in $SLURM_CI_DIR/log.
set -euo pipefail
CI_NAME=start_slurm
HERE=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
# shellcheck source=common.sh
. "$HERE/common.sh"

DIR=${SLURM_CI_DIR:-/tmp/slurm-ci}
NODES=${SLURM_CI_NODES:-1}
CPUS=${SLURM_CI_CPUS:-8}
MEM=${SLURM_CI_MEM_MB:-4096}
CTLD_PORT=${SLURM_CI_CTLD_PORT:-26817}
SLURMD_PORT=${SLURM_CI_SLURMD_PORT:-27001}
AUTH=${SLURM_CI_AUTH:-munge}
TIMEOUT=${SLURM_CI_TIMEOUT:-30}
HOST=${SLURM_CI_HOST:-auto}
PRIVATE_CGROUP=${SLURM_CI_PRIVATE_CGROUP:-auto}
NETNS=${SLURM_CI_NETNS:-0}
SUBNET=${SLURM_CI_NETNS_SUBNET:-10.213.0}
NS_PREFIX=${SLURM_CI_NETNS_PREFIX:-slurmci}

[[ $(id -u) -eq 0 ]] || ci_die "needs root (munged/slurmd run as root here)"
[[ "$NODES" =~ ^[1-9][0-9]*$ ]] || ci_die "SLURM_CI_NODES must be a positive integer, got '$NODES'"
[[ "$AUTH" == munge || "$AUTH" == none ]] || ci_die "SLURM_CI_AUTH must be munge or none"
[[ "$DIR" == /* ]] || ci_die "SLURM_CI_DIR must be an absolute path, got '$DIR'"
for tool in slurmctld slurmd sinfo ss flock; do
  command -v "$tool" >/dev/null || ci_die "$tool not found (apt-get install slurm-wlm munge iproute2)"
done
[[ "$AUTH" == none ]] || command -v munged >/dev/null || ci_die "munged not found (apt-get install munge)"

CONF=$DIR/etc/slurm.conf
RUN=$DIR/run
LOG=$DIR/log
PARAMS="nodes=$NODES cpus=$CPUS mem=$MEM ctld=$CTLD_PORT slurmd=$SLURMD_PORT auth=$AUTH host=$HOST netns=$NETNS subnet=$SUBNET prefix=$NS_PREFIX"
export SLURM_CONF=$CONF
# Marks every daemon and slurmstepd we start, so stop_slurm.sh can find strays by pid.
export SLURM_CI_OWNER=$DIR

mkdir -p "$(dirname "$DIR")"
exec 9>"$DIR.lock"
flock -w "$TIMEOUT" 9 || ci_die "could not lock $DIR.lock within ${TIMEOUT}s"

node_name() { if (( NODES == 1 && NETNS == 0 )); then echo "$CTLD_NAME"; else echo "n$1"; fi; }

# --- reuse a healthy cluster ------------------------------------------------------------------
cluster_healthy() {
  [[ -f "$RUN/params" && "$(cat "$RUN/params")" == "$PARAMS" ]] || return 1
  local f pid
  for f in "$RUN"/*.pid; do
    [[ -e "$f" ]] || return 1
    pid=$(ci_read_pid "$f")
    ci_pid_owned "$pid" "$DIR" || return 1
  done
  local usable
  usable=$(timeout 10 sinfo -h -N -o '%t' 2>/dev/null | grep -cE '^(idle|alloc|mix|comp)$' || true)
  [[ "$usable" == "$NODES" ]]
}

if cluster_healthy; then
  ci_log "reusing the healthy cluster in $DIR ($PARAMS)"
  exit 0
fi
SLURM_CI_LOCKED=1 "$HERE/stop_slurm.sh" --purge

# --- host name and binding --------------------------------------------------------------------
BIND_LOOPBACK=0
if [[ "$HOST" == auto ]]; then
  addr=$(getent hosts "$(hostname)" | awk '{print $1; exit}' || true)
  if [[ -n "$addr" ]]; then
    CTLD_NAME=$(hostname -s)
    # Binding to the host name's address only works when that is where we send the traffic.
    [[ "$addr" == 127.* && "$NETNS" == 0 ]] && BIND_LOOPBACK=1
  else
    CTLD_NAME=localhost   # slurmctld accepts localhost although the host name differs
  fi
else
  CTLD_NAME=$HOST
fi
CTLD_ADDR=127.0.0.1
(( NETNS == 1 )) && CTLD_ADDR=$SUBNET.254

# --- ports ------------------------------------------------------------------------------------
check_port_free() {
  local l
  l=$(ci_port_listener "$1")
  [[ -z "$l" ]] || ci_die "port $1 already in use: $l (set SLURM_CI_CTLD_PORT / SLURM_CI_SLURMD_PORT)"
}
check_port_free "$CTLD_PORT"
if (( NETNS == 0 )); then
  for ((i = 0; i < NODES; i++)); do check_port_free $((SLURMD_PORT + i)); done
fi

STARTED=0
on_exit() {
  local rc=$?
  if (( rc != 0 && STARTED == 1 )); then
    ci_log "start failed (rc $rc); stopping what was started; logs kept in $LOG"
    for f in "$LOG"/*.log "$LOG"/*.out; do
      [[ -s "$f" ]] && { echo "--- tail $f" >&2; tail -n 15 "$f" >&2; }
    done
    SLURM_CI_LOCKED=1 "$HERE/stop_slurm.sh" >&2 || true
  fi
}
trap on_exit EXIT

mkdir -p "$DIR"/{etc,run,log,state,spool,munge}
chmod 755 "$DIR" "$DIR/munge"   # munged: the socket directory must be world-executable
STARTED=1
echo "$PARAMS" >"$RUN/params.pending"
: >"$DIR/etc/plugstack.conf"

. "$HERE/slurm_conf.sh"   # write_slurm_conf, setup_private_cgroup, setup_netns
write_slurm_conf
setup_private_cgroup
(( NETNS == 1 )) && setup_netns

# --- daemons ----------------------------------------------------------------------------------
wait_for_file() {
  local file=$1 what=$2 deadline=$(( $(ci_now_ms) + TIMEOUT * 1000 ))
  until [[ -s "$file" ]]; do
    (( $(ci_now_ms) < deadline )) || ci_die "$what did not write $file within ${TIMEOUT}s"
    sleep 0.01
  done
}

if [[ "$AUTH" == munge ]]; then
  head -c 1024 /dev/urandom >"$DIR/munge/munge.key"
  chmod 600 "$DIR/munge/munge.key"
  munged --key-file="$DIR/munge/munge.key" --socket="$DIR/munge/munge.sock" \
    --pid-file="$RUN/munged.pid" --log-file="$LOG/munged.log" --seed-file="$DIR/munge/munged.seed" \
    </dev/null >>"$LOG/munged.out" 2>&1 9>&- || ci_die "munged failed (see $LOG/munged.log)"
  wait_for_file "$RUN/munged.pid" munged
  munge -S "$DIR/munge/munge.sock" -n </dev/null 2>>"$LOG/munged.out" |
    unmunge -S "$DIR/munge/munge.sock" >/dev/null 2>>"$LOG/munged.out" ||
    ci_die "munge self-test (munge -n | unmunge) failed"
fi

slurmctld -f "$CONF" </dev/null >>"$LOG/slurmctld.out" 2>&1 9>&- || ci_die "slurmctld failed to start"
wait_for_file "$RUN/slurmctld.pid" slurmctld

for ((i = 1; i <= NODES; i++)); do
  node=$(node_name "$i")
  if (( NETNS == 1 )); then
    nsenter --net="/run/netns/$NS_PREFIX$i" unshare --uts --mount sh -c \
      "hostname $node && mount --bind $DIR/hosts /etc/hosts &&
       mount --bind $DIR/nsswitch.conf /etc/nsswitch.conf && exec slurmd -f $CONF -N $node" \
      </dev/null >>"$LOG/slurmd-$node.out" 2>&1 9>&- || ci_die "slurmd $node failed to start"
  else
    slurmd -f "$CONF" -N "$node" </dev/null >>"$LOG/slurmd-$node.out" 2>&1 9>&- ||
      ci_die "slurmd $node failed to start"
  fi
done
for ((i = 1; i <= NODES; i++)); do
  wait_for_file "$RUN/slurmd-$(node_name "$i").pid" "slurmd $(node_name "$i")"
done

# --- readiness --------------------------------------------------------------------------------
deadline=$(( $(ci_now_ms) + TIMEOUT * 1000 ))
while :; do
  idle=$(timeout 10 sinfo -h -N -o '%t' 2>/dev/null | grep -c '^idle$' || true)
  [[ "$idle" == "$NODES" ]] && break
  (( $(ci_now_ms) < deadline )) || ci_die "only $idle of $NODES nodes idle after ${TIMEOUT}s: $(sinfo -N 2>&1 | tr '\n' ';')"
  sleep 0.02
done
ctld_pid=$(ci_read_pid "$RUN/slurmctld.pid")
ci_port_owned_by "$CTLD_PORT" "$ctld_pid" ||
  ci_die "port $CTLD_PORT is not served by our slurmctld (pid $ctld_pid): $(ci_port_listener "$CTLD_PORT")"

{
  echo "export SLURM_CONF=$CONF"
  echo "export SLURM_CI_DIR=$DIR"
  if (( NETNS == 1 )); then
    echo "export SLURM_CI_NETNS=1"
    echo "export SLURM_CI_NETNS_PREFIX=$NS_PREFIX"
    echo "export SLURM_CI_CTLD_ADDR=$CTLD_ADDR"
  fi
} >"$DIR/env"
mv "$RUN/params.pending" "$RUN/params"
STARTED=0
ci_log "cluster up in $DIR: $NODES node(s), controller $CTLD_NAME($CTLD_ADDR):$CTLD_PORT; . $DIR/env"
