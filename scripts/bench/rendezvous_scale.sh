#!/usr/bin/env bash
# Rendezvous benchmark: N agents join one round through ddprund (ddprun's rendezvous, agents as
# threads with one TCP connection each) next to torch 1.13's dynamic c10d rendezvous; and
# failure-detection latency vs the configured heartbeat timeout. Prints a markdown table.
#
# usage: scripts/bench/rendezvous_scale.sh [build-dir]     (default: build)
# env:   NODES="16 64 128 1024"  TORCH_NODES="16 64 128"  REPEAT=3  TORCH_DETECT=1 (adds ~45 s)
set -euo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)"
BUILD="${1:-$ROOT/build}"
NODES="${NODES:-16 64 128 1024}"
TORCH_NODES="${TORCH_NODES:-16 64 128}"
REPEAT="${REPEAT:-3}"
TORCH_DETECT="${TORCH_DETECT:-1}"
PY=/usr/bin/python3
for bin in ddprund rendezvous_scale; do
  [[ -x "$BUILD/bin/$bin" ]] || { echo "missing $BUILD/bin/$bin (build it first)" >&2; exit 2; }
done
# 1024 agents = 1024 client sockets in one process (and as many on the daemon).
ulimit -n "$(ulimit -Hn)" 2>/dev/null || true
if (( $(ulimit -n) < 2200 )); then echo "warning: ulimit -n is $(ulimit -n); 1024 agents need ~2100" >&2; fi

WORK="$(mktemp -d)"
DAEMON_PID=""
cleanup() {
  if [[ -n "$DAEMON_PID" ]]; then kill "$DAEMON_PID" 2>/dev/null || true; wait "$DAEMON_PID" 2>/dev/null || true; fi
  rm -rf "$WORK"
}
trap cleanup EXIT

"$BUILD/bin/ddprund" --host 127.0.0.1 --port 0 --port-file "$WORK/port" --log-level warn \
  > "$WORK/ddprund.log" 2>&1 &
DAEMON_PID=$!
for _ in $(seq 100); do [[ -s "$WORK/port" ]] && break; sleep 0.1; done
PORT="$(cat "$WORK/port")"
RESULTS="$WORK/results.jsonl"
run=0

for n in $NODES; do
  for _ in $(seq "$REPEAT"); do
    run=$((run + 1))
    "$BUILD/bin/rendezvous_scale" --port "$PORT" --nodes "$n" --run-id "join-$run" >> "$RESULTS"
  done
done
for n in $TORCH_NODES; do
  timeout 300 "$PY" "$ROOT/tests/bench/torch_rendezvous_scale.py" --nodes "$n" \
    --run-id "torch-$n" 2>>"$WORK/torch.log" | grep '^{' >> "$RESULTS" \
    || echo "{\"mode\":\"join\",\"impl\":\"torch-1.13-c10d\",\"nodes\":$n,\"join_ms\":null}" >> "$RESULTS"
done
for hb in 500 1000 2000; do
  run=$((run + 1))
  "$BUILD/bin/rendezvous_scale" --port "$PORT" --nodes 8 --mode detect --heartbeat-timeout-ms "$hb" \
    --keep-alive-ms 100 --last-call-ms 200 --run-id "detect-$run" >> "$RESULTS"
done
if [[ "$TORCH_DETECT" == 1 ]]; then
  "$PY" "$ROOT/tests/bench/torch_rendezvous_scale.py" --nodes 4 --min-nodes 3 --mode detect \
    --watch-s 40 --run-id torch-detect 2>>"$WORK/torch.log" | grep '^{' >> "$RESULTS" || true
fi

"$PY" - "$RESULTS" "$(nproc)" <<'PYEOF'
import json, statistics, sys
rows = [json.loads(l) for l in open(sys.argv[1]) if l.strip()]
print(f"\nRendezvous join: N agents on one {sys.argv[2]}-core machine, loopback; median of runs, ms\n")
print("| agents | ddprun (all joined) | ddprun first / median agent | torch 1.13 c10d (all joined) |")
print("|---:|---:|---:|---:|")
ns = sorted({r["nodes"] for r in rows if r["mode"] == "join"})
for n in ns:
    ours = [r for r in rows if r["mode"] == "join" and r["impl"] == "ddprun" and r["nodes"] == n]
    torch = [r for r in rows if r["mode"] == "join" and r["impl"] != "ddprun" and r["nodes"] == n]
    med = lambda key, rs: statistics.median(r[key] for r in rs)
    o = f"{med('join_ms', ours):.0f}" if ours else "—"
    of = f"{med('first_ms', ours):.0f} / {med('median_ms', ours):.0f}" if ours else "—"
    t = "—" if not torch else ("failed/timeout" if torch[0]["join_ms"] is None else f"{torch[0]['join_ms']:.0f}")
    print(f"| {n} | {o} | {of} | {t} |")
print("\nFailure detection: one of N agents stops heartbeating (SIGKILL-like), ms after the kill\n")
print("| impl | agents | heartbeat timeout | survivors notified | survivors' new round complete |")
print("|---|---:|---:|---:|---:|")
for r in rows:
    if r["mode"] != "detect":
        continue
    if r["impl"] == "ddprun":
        print(f"| ddprun | {r['nodes']} | {r['heartbeat_timeout_ms']} (keep-alive {r['keep_alive_ms']}) "
              f"| {r['detect_ms']:.0f} | {r['new_round_ms']:.0f} (last call {r['last_call_ms']}) |")
    else:
        s = r["survivors_signalled_ms"]
        note = f"{s:.0f}" if s is not None else f"never (watched {r['watched_s']:.0f} s)"
        print(f"| torch 1.13 c10d | {r['nodes']} | {r['heartbeat_timeout_ms']} (5 s x 3) | {note} | — |")
PYEOF
