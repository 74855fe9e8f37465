#!/usr/bin/env bash
# Scaling efficiency as seed 001 defines it: efficiency = speed at N workers / (N x speed at 1).
#
#   scripts/scaling_report.sh [--build DIR] [--out DIR] [--workers "1 2 4 8"] [--steps N]
#                             [--warmup N] [--batch B] [--repeat R]
#
# Runs the same training (`train` on the CPU with its defaults: gradients summed through shared
# memory, Gloo for the rest; the per-worker batch stays the same, so N workers do N times the work
# per step) under `ddprun --standalone --nproc-per-node=N` for each N,
# skips the first --warmup steps, and measures samples/s from rank 0's metrics (the wall time
# between the metrics lines after the warm-up and the last one), best of --repeat runs (other load
# on the machine only ever slows a run down; the 1-minute load average before each run is kept
# too). Prints a table, writes
# <out>/scaling.json and draws <out>/scaling.png (samples/s against the ideal line, efficiency,
# and the loss curves of every N; python3-matplotlib). Worker counts above the machine's CPU count
# oversubscribe its cores: the table, the JSON and the picture say so.
# Defaults: --build build, --out docs, --workers "1 2 4 8", --steps 300, --warmup 50, --batch 128,
# --repeat 3.
set -euo pipefail
cd "$(dirname "$0")/.."

BUILD=build OUT=docs WORKERS="1 2 4 8" STEPS=300 WARMUP=50 BATCH=128 REPEAT=3
while [ $# -gt 0 ]; do
  case "$1" in
    --build) BUILD=$2; shift 2 ;;
    --out) OUT=$2; shift 2 ;;
    --workers) WORKERS=$2; shift 2 ;;
    --steps) STEPS=$2; shift 2 ;;
    --warmup) WARMUP=$2; shift 2 ;;
    --batch) BATCH=$2; shift 2 ;;
    --repeat) REPEAT=$2; shift 2 ;;
    *) echo "scaling_report.sh: unknown argument $1 (see the header of this script)" >&2; exit 2 ;;
  esac
done
if [ "$WARMUP" -ge "$STEPS" ]; then
  echo "scaling_report.sh: --warmup ($WARMUP) must be below --steps ($STEPS)" >&2
  exit 2
fi
for bin in train ddprun; do
  [ -x "$BUILD/bin/$bin" ] || { echo "scaling_report.sh: no $BUILD/bin/$bin (build first)" >&2; exit 2; }
done
PY=/usr/bin/python3  # Debian's, with python3-matplotlib (scripts/setup.sh)
CORES=$(nproc)
WORK=$(mktemp -d "${TMPDIR:-/tmp}/ddp_scaling_XXXXXX")
trap 'rm -rf "$WORK"' EXIT
mkdir -p "$OUT"

"$BUILD/bin/train" make-data --out "$WORK/data" --samples 65536 --features 64 --classes 10 \
  --shards 8 --seed 1 >/dev/null
LOG_EVERY=10
cat > "$WORK/config.json" <<JSON
{"data": "$WORK/data", "hidden": [256, 256], "device": "cpu", "backend": "gloo", "seed": 0,
 "epochs": 1000, "max_steps": $STEPS, "batch_size": $BATCH, "optimizer": "adamw", "lr": 0.001,
 "lr_scaling": "none", "log_every": $LOG_EVERY, "progress_seconds": 100000}
JSON

RUNS=()
for n in $WORKERS; do
  note=""
  [ "$n" -gt "$CORES" ] && note=" (oversubscribed: $n workers on $CORES cores)"
  for r in $(seq 1 "$REPEAT"); do
    echo "scaling_report: $n worker(s), run $r of $REPEAT: $STEPS steps of $BATCH samples per" \
         "worker$note" >&2
    cut -d' ' -f1 /proc/loadavg > "$WORK/load_${n}_$r"
    # Only rank 0 writes metrics. One BLAS/OpenMP thread per worker (ddprun's default for N > 1, set
    # for N = 1 too, so that one worker does not use every core while N workers share them).
    OMP_NUM_THREADS=1 OPENBLAS_NUM_THREADS=1 "$BUILD/bin/ddprun" --standalone --nproc-per-node="$n" \
      --log-level=warn "$BUILD/bin/train" --config "$WORK/config.json" \
      --metrics "$WORK/metrics_${n}_$r.jsonl" --log-level=warn >"$WORK/run_$n.log" 2>&1 || {
        echo "scaling_report.sh: the run with $n worker(s) failed:" >&2
        tail -20 "$WORK/run_$n.log" >&2
        exit 1
      }
  done
  RUNS+=("$n")
done

"$PY" scripts/scaling_plot.py --work "$WORK" --out "$OUT" --workers "${RUNS[*]}" --cores "$CORES" \
  --warmup "$WARMUP" --batch "$BATCH" --steps "$STEPS" --repeat "$REPEAT" \
  --command "scripts/scaling_report.sh --workers \"$WORKERS\" --steps $STEPS --warmup $WARMUP --batch $BATCH --repeat $REPEAT"
