#!/usr/bin/env bash
# Recovery from faults, side by side in one run (issue 21, item 5; issue 32, item 6): ddprun in
# place (--restart-scope=failed) vs ddprun's full restart (--restart-scope=all, the default; the
# workers resume from their checkpoint) vs torchrun 1.13 + PyTorch DDP resuming from its checkpoint
# (tests/bench/torch_ddp_recovery.py). TRAINER picks what ddprun runs: `train` (the C++ trainer,
# the default) or `torch` (that same PyTorch script, which recovers in place through ddprun.torch
# from worker_runtime/python). Same MLP, data, batch and checkpoint interval for every trainer;
# one BLAS thread per worker. Prints markdown tables with ratios:
#   1. time from a worker SIGKILL to the first step completed after it, and the steps redone, at
#      TOPOLOGIES (1x2, 1x4: one node; 2x2: two agents on loopback with a ddprund);
#      goals at 4 workers in place: train <= 100 ms; torch <= 150 ms and >= 25x faster than
#      torchrun; steps redone <= 1;
#   2. goodput (fault-free time / time with faults) over DURATION s with a SIGKILL every
#      KILL_EVERY s; goal in place: train >= 98%, torch >= 97%;
#   3. node loss at 2x2 (--nnodes 1:2, node 1's agent SIGKILLed): time until the survivors step
#      again, and that minus RDZV_CONF's heartbeat_timeout; goal: <= 300 ms.
# The progress files are followed from this script's own Python process (time.monotonic(), the
# order in which it sees the lines); see scripts/bench/recovery_bench.py for the exact rules.
# Ports come from the OS (ddprun --standalone; ddprund --port 0, which torchrun's agents use as
# their c10d store: torch 1.13's --standalone takes the fixed port 29400), on 127.0.0.1 only; every
# process started is stopped by its process group and pid.
#
# usage: scripts/bench/recovery.sh [build-dir]      (default: build)
# env:   TRAINER=train (or torch) TOPOLOGIES="1x2 1x4 2x2" MODES="inplace full torchrun" KILLS=3
#        KILL_GAP=10.5 EXPERIMENTS="latency goodput node_loss" DURATION=180 KILL_EVERY=10
#        REF_SECONDS=30 GOODPUT_TOPOLOGY=1x4 NODE_KILLS=3 CKPT_EVERY=100 HIDDEN=512,512 BATCH=256
#        FEATURES=32 CLASSES=4 SAMPLES=65536 LOG_LEVEL=info SEED=1 KEEP=0 (1: keep the work dir)
#        RDZV_CONF="join_timeout=60,last_call_timeout=0.5,close_timeout=5,keep_alive_interval=0.5,heartbeat_timeout=3,read_timeout=10"
set -euo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)"
BUILD="$(cd "${1:-$ROOT/build}" && pwd)"
for b in ddprun ddprund train; do
  [[ -x "$BUILD/bin/$b" ]] || { echo "missing $BUILD/bin/$b (build it first)" >&2; exit 2; }
done
/usr/bin/python3 -c 'import torch' 2>/dev/null || { echo "torch for /usr/bin/python3 is needed" >&2; exit 2; }
WORK="$(mktemp -d)"
if [[ "${KEEP:-0}" == 1 ]]; then
  trap 'echo "work dir kept: $WORK" >&2' EXIT
else
  trap 'rm -rf "$WORK"' EXIT
fi
export LOGLEVEL=WARNING
/usr/bin/python3 "$ROOT/scripts/bench/recovery_bench.py" "$BUILD" "$WORK"
