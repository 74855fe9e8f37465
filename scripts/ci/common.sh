# Shared helpers of the CI service scripts (start/stop_slurm.sh, start/stop_etcd.sh, netns.sh).
# Sourced, not run. Every process is handled by pid (never by name): a pid is only signalled after
# its /proc/PID/cmdline was checked to mention the service's own directory.

ci_log() { echo "$CI_NAME: $*" >&2; }
ci_die() { ci_log "error: $*"; exit 1; }

# True when PID runs and is not a zombie. PID 1 of some sandboxes reaps orphans late, and
# `kill -0` succeeds on a zombie, so /proc/PID/stat decides.
ci_pid_alive() {
  local pid=$1 stat
  [[ "$pid" =~ ^[0-9]+$ ]] || return 1
  stat=$(cat "/proc/$pid/stat" 2>/dev/null) || return 1
  stat=${stat##*) }
  [[ "${stat:0:1}" != "Z" && "${stat:0:1}" != "X" ]]
}

# True when PID is alive and its command line contains NEEDLE (our directory).
ci_pid_owned() {
  local pid=$1 needle=$2
  local cmdline
  ci_pid_alive "$pid" || return 1
  cmdline=$(tr '\0' ' ' 2>/dev/null <"/proc/$pid/cmdline") || return 1
  [[ "$cmdline" == *"$needle"* ]]
}

# Prints the pid stored in FILE (nothing when missing or garbage).
ci_read_pid() {
  local file=$1 pid
  [[ -s "$file" ]] || return 0
  pid=$(tr -dc '0-9' <"$file" 2>/dev/null | head -c 10)
  [[ -n "$pid" ]] && echo "$pid"
  return 0
}

# Waits up to SECONDS (fractional ok) for PID to be gone or a zombie. Returns 1 on timeout.
ci_wait_gone() {
  local pid=$1 secs=$2 deadline
  deadline=$(( $(date +%s%N) + ${secs%.*} * 1000000000 ))
  while ci_pid_alive "$pid"; do
    (( $(date +%s%N) < deadline )) || return 1
    sleep 0.02
  done
  return 0
}

# SIGTERM to PID if it is alive and owned (cmdline mentions NEEDLE); waits up to SECS for it to
# exit, then SIGKILL. Prints what it did.
ci_stop_pid() {
  local pid=$1 needle=$2 what=$3 secs=${4:-10}
  [[ -n "$pid" ]] || return 0
  if ! ci_pid_owned "$pid" "$needle"; then
    return 0
  fi
  kill -TERM "$pid" 2>/dev/null || true
  if ! ci_wait_gone "$pid" "$secs"; then
    ci_log "$what (pid $pid) still alive after ${secs}s: SIGKILL"
    kill -KILL "$pid" 2>/dev/null || true
    ci_wait_gone "$pid" 5 || ci_log "$what (pid $pid) survived SIGKILL"
  fi
}

# Prints the "ss" line of a TCP listener on PORT (any address) in the current network namespace.
ci_port_listener() {
  ss -Hltnp "sport = :$1" 2>/dev/null | sed -n 1p
}

ci_port_busy() { [[ -n "$(ci_port_listener "$1")" ]]; }

# True when the listener on PORT belongs to PID.
ci_port_owned_by() {
  [[ "$(ci_port_listener "$1")" == *"pid=$2,"* ]]
}

# Milliseconds since the epoch.
ci_now_ms() { echo $(( $(date +%s%N) / 1000000 )); }
