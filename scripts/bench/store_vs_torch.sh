#!/usr/bin/env bash
# ddprund vs torch 1.13's own TCPStore server, side by side on this machine.
#
# Each server gets N = 1, 16, 64, 256 connections from tests/bench/store_load.cpp, every connection
# looping over SET + WAIT + GET rounds (what torch's client sends for set() then get()) in the v1a
# dialect both servers speak. Prints a markdown table: requests/s, p50 and p99 round latency, and
# the ratios; then ddprund's resident memory (VmRSS) idle and after storing 100k keys.
#
# Usage: scripts/bench/store_vs_torch.sh
#   BUILD_DIR   build folder (default: build); ddprund and store_load are built there if needed
#   DURATION    measured seconds per run (default 4; the whole script stays under 3 minutes)
#   CONNECTIONS connection counts (default "1 16 64 256")
#   THREADS     load generator threads (default 1)
#   DDPRUND_FLAGS extra ddprund flags, e.g. "--data-dir /var/tmp/d --fsync batch" (the cost of
#               durability; give it an empty directory)
#   SCRAPE_MS   when set, a scraper fetches ddprund's /metrics every SCRAPE_MS ms during the runs
#               (what a status page or a Prometheus server polling hard costs the store)
#
# Besides wall-clock figures (which a busy machine distorts for both servers alike) it reports
# each server's CPU time per request, from /proc/<pid>/stat: the cost that bounds a single-threaded
# server's throughput once it has a core to itself.
set -euo pipefail

ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
BUILD_DIR=${BUILD_DIR:-$ROOT/build}
DURATION=${DURATION:-4}
CONNECTIONS=${CONNECTIONS:-"1 16 64 256"}
THREADS=${THREADS:-1}
WORK=$(mktemp -d)
DDPRUND_PID=""
TORCH_PID=""
SCRAPER_PID=""
SCRAPE_MS=${SCRAPE_MS:-}

cleanup() {
  for pid in $SCRAPER_PID $DDPRUND_PID $TORCH_PID; do
    kill "$pid" 2>/dev/null || true
    wait "$pid" 2>/dev/null || true
  done
  rm -rf "$WORK"
}
trap cleanup EXIT

if [ ! -f "$BUILD_DIR/CMakeCache.txt" ]; then
  cmake -S "$ROOT" -B "$BUILD_DIR" -DDDP_WITH_CUDA=AUTO >/dev/null
fi
cmake --build "$BUILD_DIR" -j2 --target ddprund store_load >/dev/null
LOAD="$BUILD_DIR/bin/store_load"

# Waits (10 s at most) for a non-empty file.
wait_for_file() {
  for _ in $(seq 100); do
    [ -s "$1" ] && return 0
    sleep 0.1
  done
  echo "store_vs_torch: $2 did not report its port" >&2
  exit 1
}

HTTP_ARGS=()
[ -n "$SCRAPE_MS" ] && HTTP_ARGS=(--http-port-file "$WORK/http.port")
# shellcheck disable=SC2086 # DDPRUND_FLAGS is a list of flags
"$BUILD_DIR/bin/ddprund" --host 127.0.0.1 --port 0 --port-file "$WORK/ddprund.port" \
  "${HTTP_ARGS[@]}" --log-level warn ${DDPRUND_FLAGS:-} >"$WORK/ddprund.log" 2>&1 &
DDPRUND_PID=$!
wait_for_file "$WORK/ddprund.port" ddprund
DDPRUND_PORT=$(cat "$WORK/ddprund.port")
if [ -n "$SCRAPE_MS" ]; then
  wait_for_file "$WORK/http.port" "ddprund's status pages"
  SCRAPE_URL="http://127.0.0.1:$(cat "$WORK/http.port")/metrics"
  PAUSE=$(awk -v m="$SCRAPE_MS" 'BEGIN { print m / 1000 }')
  ( while :; do curl -s -o /dev/null "$SCRAPE_URL"; sleep "$PAUSE"; done ) &
  SCRAPER_PID=$!
  echo "scraping $SCRAPE_URL every $SCRAPE_MS ms"
fi

/usr/bin/python3 -u -c "
import datetime, signal, torch.distributed as dist
s = dist.TCPStore('127.0.0.1', 0, None, True, datetime.timedelta(seconds=600), wait_for_workers=False)
open('$WORK/torch.port.tmp', 'w').write(str(s.port))
import os; os.rename('$WORK/torch.port.tmp', '$WORK/torch.port')
signal.pause()
" >"$WORK/torch.log" 2>&1 &
TORCH_PID=$!
for _ in $(seq 60); do [ -s "$WORK/torch.port" ] && break; sleep 0.5; done
wait_for_file "$WORK/torch.port" "torch's TCPStore server"
TORCH_PORT=$(cat "$WORK/torch.port")

rss_kib() { awk '/^VmRSS:/ {print $2}' "/proc/$1/status"; }
IDLE_RSS=$(rss_kib "$DDPRUND_PID")

# CPU time (user + system) of a process in clock ticks.
cpu_ticks() { awk '{print $14 + $15}' "/proc/$1/stat"; }
TICK_US=$((1000000 / $(getconf CLK_TCK)))

# Runs the load generator against one server; prints its result line plus cpu_us_per_req=.
measure() {
  local pid=$1 port=$2 n=$3 before after line requests
  before=$(cpu_ticks "$pid")
  line=$("$LOAD" --port "$port" --connections "$n" --duration "$DURATION" --threads "$THREADS")
  after=$(cpu_ticks "$pid")
  requests=$(awk -v r="$(field rounds "$line")" 'BEGIN { print 3 * r }')
  echo "$line cpu_us_per_req=$(awk -v t=$((after - before)) -v u="$TICK_US" -v q="$requests" \
    'BEGIN { if (q > 0) printf "%.1f", t * u / q; else print 0 }')"
}

field() { sed -n "s/.*$1=\([0-9.]*\).*/\1/p" <<<"$2"; }
ratio() { awk -v a="$1" -v b="$2" 'BEGIN { if (b > 0) printf "%.2f", a / b; else print "n/a" }'; }

echo "Store load: SET+WAIT+GET rounds (3 requests each), v1a dialect, ${DURATION} s per run," \
  "$(nproc) CPUs, load average $(cut -d' ' -f1 /proc/loadavg) at start"
echo
echo "| connections | ddprund req/s | torch 1.13 req/s | req/s ratio | ddprund p50 µs | torch p50 µs | ddprund p99 µs | torch p99 µs | p99 ratio (ddprund/torch) | ddprund CPU µs/req | torch CPU µs/req |"
echo "|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|"
for n in $CONNECTIONS; do
  ours=$(measure "$DDPRUND_PID" "$DDPRUND_PORT" "$n")
  theirs=$(measure "$TORCH_PID" "$TORCH_PORT" "$n")
  o_rps=$(field requests_per_s "$ours"); t_rps=$(field requests_per_s "$theirs")
  o_p50=$(field p50_us "$ours"); t_p50=$(field p50_us "$theirs")
  o_p99=$(field p99_us "$ours"); t_p99=$(field p99_us "$theirs")
  o_cpu=$(field cpu_us_per_req "$ours"); t_cpu=$(field cpu_us_per_req "$theirs")
  echo "| $n | $o_rps | $t_rps | $(ratio "$o_rps" "$t_rps") | $o_p50 | $t_p50 | $o_p99 | $t_p99 |" \
    "$(ratio "$o_p99" "$t_p99") | $o_cpu | $t_cpu |"
done

"$LOAD" --port "$DDPRUND_PORT" --fill 100000 >/dev/null
FULL_RSS=$(rss_kib "$DDPRUND_PID")
echo
echo "ddprund resident memory (VmRSS): idle $((IDLE_RSS / 1024)) MiB (${IDLE_RSS} KiB);" \
  "after storing 100k keys (64-byte values) $((FULL_RSS / 1024)) MiB (${FULL_RSS} KiB)"
