#!/usr/bin/env bash
# N ranks initialising at once against ddprund and against torch 1.13's own TCPStore server, side
# by side (tests/bench/store_scale.cpp: connect, SET own address, ADD a counter, WAIT a barrier key,
# then WAIT + GET of 8 peers' addresses; v1a wire; one epoll client thread).
#
# Prints a markdown table: for each N, each server's time until every rank finished (or the
# timeout), finished ranks, the CPU time the server used (user + system, from /proc/PID/stat: what
# a busy machine does not distort) and its peak resident memory (VmHWM); then ddprund's memory per
# idle connection (N connections that each sent one request, held open).
#
# Usage: scripts/bench/store_scale.sh
#   BUILD_DIR      build folder (default: build); ddprund and store_scale are built there if needed
#   RANKS          rank counts (default "1024 4096 16384")
#   TIMEOUT        seconds a run may take before the ranks still running count as unfinished
#                  (default 60; torch 1.13 at 16k does not finish in 240 s)
#   TORCH          0 skips torch's server
#   IDLE_RANKS     connections for the idle-memory line (default: the largest of RANKS)
# Raises the open-file limit to the hard limit (each side needs N + a few descriptors).
set -euo pipefail

ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
BUILD_DIR=${BUILD_DIR:-$ROOT/build}
RANKS=${RANKS:-"1024 4096 16384"}
TIMEOUT=${TIMEOUT:-60}
TORCH=${TORCH:-1}
WORK=$(mktemp -d)
SERVER_PID=""

cleanup() {
  if [ -n "$SERVER_PID" ]; then
    kill "$SERVER_PID" 2>/dev/null || true
    wait "$SERVER_PID" 2>/dev/null || true
  fi
  rm -rf "$WORK"
}
trap cleanup EXIT

ulimit -n "$(ulimit -Hn)"
largest=0
for n in $RANKS; do [ "$n" -gt "$largest" ] && largest=$n; done
IDLE_RANKS=${IDLE_RANKS:-$largest}
if [ "$(ulimit -n)" -lt $((largest + 100)) ]; then
  echo "store_scale: $largest ranks need $((largest + 100)) open files; the hard limit is" \
    "$(ulimit -Hn)" >&2
  exit 1
fi

if [ ! -f "$BUILD_DIR/CMakeCache.txt" ]; then
  cmake -S "$ROOT" -B "$BUILD_DIR" -DDDP_WITH_CUDA=AUTO >/dev/null
fi
cmake --build "$BUILD_DIR" -j2 --target ddprund store_scale >/dev/null
SCALE="$BUILD_DIR/bin/store_scale"

# Waits (60 s at most) for a non-empty file.
wait_for_file() {
  for _ in $(seq 600); do
    [ -s "$1" ] && return 0
    sleep 0.1
  done
  echo "store_scale: $2 did not report its port" >&2
  exit 1
}

start_ddprund() {
  rm -f "$WORK/port"
  "$BUILD_DIR/bin/ddprund" --host 127.0.0.1 --port 0 --port-file "$WORK/port" --log-level warn \
    >"$WORK/ddprund.log" 2>&1 &
  SERVER_PID=$!
  wait_for_file "$WORK/port" ddprund
}

start_torch() {
  rm -f "$WORK/port"
  /usr/bin/python3 -u -c "
import datetime, os, signal, torch.distributed as dist
s = dist.TCPStore('127.0.0.1', 0, None, True, datetime.timedelta(seconds=600), wait_for_workers=False)
open('$WORK/port.tmp', 'w').write(str(s.port)); os.rename('$WORK/port.tmp', '$WORK/port')
signal.pause()
" >"$WORK/torch.log" 2>&1 &
  SERVER_PID=$!
  wait_for_file "$WORK/port" "torch's TCPStore server"
}

stop_server() {
  kill "$SERVER_PID" 2>/dev/null || true
  wait "$SERVER_PID" 2>/dev/null || true
  SERVER_PID=""
}

cpu_s() { awk -v hz="$(getconf CLK_TCK)" '{printf "%.2f", ($14 + $15) / hz}' "/proc/$SERVER_PID/stat"; }
kib() { awk "/^$1:/ {print \$2}" "/proc/$SERVER_PID/status"; }
field() { sed -n "s/.*$1=\([0-9.]*\).*/\1/p" <<<"$2"; }

# Runs N ranks against the server just started; prints "seconds finished cpu_s peak_MiB".
measure() {
  local n=$1 line cpu0
  cpu0=$(cpu_s)  # what the server used to start (torch: importing Python modules) is not counted
  line=$("$SCALE" --port "$(cat "$WORK/port")" --ranks "$n" --timeout "$TIMEOUT" || true)
  echo "$(field seconds "$line") $(field finished "$line") $(awk -v a="$(cpu_s)" -v b="$cpu0" 'BEGIN {printf "%.2f", a - b}') $(( $(kib VmHWM) / 1024 ))"
}

echo "Store at scale: N ranks initialising at once (SET, ADD, WAIT barrier, WAIT+GET x 8 peers;" \
  "v1a), one epoll client; $(nproc) CPUs, load average $(cut -d' ' -f1 /proc/loadavg) at start;" \
  "timeout ${TIMEOUT} s"
echo
echo "| ranks | ddprund s | finished | CPU s | peak RSS MiB | torch 1.13 s | finished | CPU s | peak RSS MiB |"
echo "|---:|---:|---:|---:|---:|---:|---:|---:|---:|"
for n in $RANKS; do
  start_ddprund
  read -r o_s o_f o_cpu o_rss <<<"$(measure "$n")"
  stop_server
  t_s="–"; t_f="–"; t_cpu="–"; t_rss="–"
  if [ "$TORCH" != "0" ]; then
    start_torch
    read -r t_s t_f t_cpu t_rss <<<"$(measure "$n")"
    stop_server
  fi
  echo "| $n | $o_s | $o_f | $o_cpu | $o_rss | $t_s | $t_f | $t_cpu | $t_rss |"
done

# Memory per idle connection: RSS with IDLE_RANKS connections open minus RSS before them.
start_ddprund
before=$(kib VmRSS)
"$SCALE" --port "$(cat "$WORK/port")" --ranks "$IDLE_RANKS" --idle-hold 3 >"$WORK/idle.out" &
idle_pid=$!
wait_for_file "$WORK/idle.out" "the idle clients"
after=$(kib VmRSS)
wait "$idle_pid" || true
stop_server
echo
echo "ddprund memory per idle connection: $(awk -v a="$after" -v b="$before" -v n="$IDLE_RANKS" \
  'BEGIN { printf "%.2f", (a - b) / n }') KiB (VmRSS $before KiB -> $after KiB with $IDLE_RANKS" \
  "idle connections)"
