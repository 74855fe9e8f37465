#!/usr/bin/env bash
# ddprun vs torchrun (torch 1.13) side by side on this machine:
#   1. launch-to-exit of N no-op workers (/bin/true), N = 2 and 8: median wall time and median
#      peak RSS of the launcher process (GNU time %M) over RUNS runs each;
#   2. time per restart: a worker that fails while TORCHELASTIC_RESTART_COUNT < K, run with
#      --max-restarts=K; (time with K restarts - time with none) / K.
# Both launchers run with the same flags: --standalone, redirects and tee of stdout, no Python
# entry point. torchrun: /usr/bin/python3 -m torch.distributed.run --monitor_interval=0.1.
# Prints a markdown table with the ratios (goals: >= 50x faster launch, >= 20x less memory,
# <= 20 ms per restart).
#
# usage: scripts/bench/launch_vs_torchrun.sh [build-dir]      (default: build)
# env:   RUNS=5  K=20  WORKERS="2 8"
set -euo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)"
BUILD="${1:-$ROOT/build}"
RUNS="${RUNS:-5}"
K="${K:-20}"
WORKERS="${WORKERS:-2 8}"
DDPRUN="$BUILD/bin/ddprun"
[[ -x "$DDPRUN" ]] || { echo "missing $DDPRUN (build it first)" >&2; exit 2; }
[[ -x /usr/bin/time ]] || { echo "GNU time (/usr/bin/time) is needed" >&2; exit 2; }
WORK="$(mktemp -d)"
trap 'rm -rf "$WORK"' EXIT
export DDP_LOG_LEVEL=warn LOGLEVEL=WARNING

# <which>_cmd nproc max_restarts command...: sets the CMD array.
ddprun_cmd() {
  local n=$1 r=$2; shift 2
  CMD=("$DDPRUN" --standalone --nproc-per-node="$n" --max-restarts="$r" --redirects=1 --tee=1
       --log-dir="$WORK/ddprun-logs" --no-python "$@")
}
torchrun_cmd() {
  local n=$1 r=$2; shift 2
  CMD=(/usr/bin/python3 -m torch.distributed.run --standalone --nproc_per_node="$n"
       --max_restarts="$r" --monitor_interval=0.1 --redirects=1 --tee=1
       --log_dir="$WORK/torchrun-logs" --no_python "$@")
}

# Runs a command once; prints "<wall ms> <peak RSS KiB>". Fails loudly on a non-zero exit.
measure() {
  local start end
  start=$(date +%s%N)
  if ! /usr/bin/time -f %M -o "$WORK/rss" "$@" >"$WORK/out" 2>"$WORK/err"; then
    echo "command failed: $*" >&2; tail -20 "$WORK/err" >&2; exit 1
  fi
  end=$(date +%s%N)
  echo "$(( (end - start) / 1000000 )) $(tail -1 "$WORK/rss")"
}

median() { sort -n | awk '{a[NR]=$1} END {print (NR%2) ? a[(NR+1)/2] : (a[NR/2]+a[NR/2+1])/2}'; }

# launch <which> <n>: sets WALL and RSS (medians over RUNS runs)
launch() {
  local which=$1 n=$2 walls=() rsses=() w r
  for _ in $(seq "$RUNS"); do
    "${which}_cmd" "$n" 0 /bin/true
    read -r w r < <(measure "${CMD[@]}")
    walls+=("$w"); rsses+=("$r")
  done
  WALL=$(printf '%s\n' "${walls[@]}" | median)
  RSS=$(printf '%s\n' "${rsses[@]}" | median)
}

# per_restart <which>: sets RESTART (ms per restart, median over 3 runs of each)
per_restart() {
  local which=$1 base=() many=() w r
  local fail_until="[ \"\$TORCHELASTIC_RESTART_COUNT\" -ge $K ]"
  for _ in 1 2 3; do
    "${which}_cmd" 2 0 /bin/true
    read -r w r < <(measure "${CMD[@]}"); base+=("$w")
    "${which}_cmd" 2 "$K" /bin/sh -c "$fail_until"
    read -r w r < <(measure "${CMD[@]}"); many+=("$w")
  done
  local b m
  b=$(printf '%s\n' "${base[@]}" | median)
  m=$(printf '%s\n' "${many[@]}" | median)
  RESTART=$(awk -v b="$b" -v m="$m" -v k="$K" 'BEGIN {printf "%.1f", (m - b) / k}')
}

ratio() { awk -v a="$1" -v b="$2" 'BEGIN {printf (b > 0 ? "%.0fx" : "-"), a / b}'; }

echo "| measurement | torchrun 1.13 | ddprun | ratio |"
echo "|---|---|---|---|"
for n in $WORKERS; do
  launch torchrun "$n"; tw=$WALL; tr=$RSS
  launch ddprun "$n"; dw=$WALL; dr=$RSS
  echo "| launch-to-exit, $n no-op workers (median of $RUNS) | ${tw} ms | ${dw} ms | $(ratio "$tw" "$dw") faster |"
  echo "| launcher peak RSS, $n workers (median of $RUNS) | $((tr / 1024)) MiB | $(awk -v k="$dr" 'BEGIN {printf "%.1f", k / 1024}') MiB | $(ratio "$tr" "$dr") less |"
done
per_restart torchrun; tres=$RESTART
per_restart ddprun; dres=$RESTART
echo "| time per restart (2 workers, $K restarts, median of 3) | ${tres} ms | ${dres} ms | $(ratio "$tres" "$dres") faster |"
