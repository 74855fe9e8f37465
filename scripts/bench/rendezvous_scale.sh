#!/usr/bin/env bash
# Rendezvous benchmark: N agents join one round through ddprund (ddprun's rendezvous, agents as
# threads with one TCP connection each, spread over processes of at most AGENTS_PER_PROCESS) next
# to torch 1.13's dynamic c10d rendezvous; and failure-detection latency vs the configured
# heartbeat timeout. Prints markdown tables.
#
# usage: scripts/bench/rendezvous_scale.sh [build-dir]     (default: build)
# env:   NODES="16 64 256 1024 4096 16384"  TORCH_NODES="16 64 128"  REPEAT=3
#        TORCH_DETECT=1 (adds ~45 s)  AGENTS_PER_PROCESS=2048  AGENT_SCHED=batch|normal
#
# The agents stand in for N machines but share this machine's cores with ddprund: they run under
# SCHED_BATCH (AGENT_SCHED=batch, the default), so that a reply waking an agent thread does not
# preempt the daemon on its core (each real agent has a machine of its own).
set -euo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)"
BUILD="${1:-$ROOT/build}"
NODES="${NODES:-16 64 256 1024 4096 16384}"
TORCH_NODES="${TORCH_NODES:-16 64 128}"
REPEAT="${REPEAT:-3}"
TORCH_DETECT="${TORCH_DETECT:-1}"
AGENTS_PER_PROCESS="${AGENTS_PER_PROCESS:-2048}"
AGENT_SCHED="${AGENT_SCHED:-batch}"
PY=/usr/bin/python3
for bin in ddprund rendezvous_scale; do
  [[ -x "$BUILD/bin/$bin" ]] || { echo "missing $BUILD/bin/$bin (build it first)" >&2; exit 2; }
done
# Every agent holds 5 descriptors in its process (socket, wake eventfd, its io_context's epoll,
# eventfd and timerfd), ddprund one per agent: raise the open-file limit to the hard limit.
ulimit -n "$(ulimit -Hn)" 2>/dev/null || true
FD_LIMIT="$(ulimit -n)"
if (( AGENTS_PER_PROCESS * 5 + 64 > FD_LIMIT )); then
  AGENTS_PER_PROCESS=$(( (FD_LIMIT - 64) / 5 ))
  echo "note: ulimit -n is $FD_LIMIT: at most $AGENTS_PER_PROCESS agents per process" >&2
fi
MAX_NODES=0
for n in $NODES; do (( n > MAX_NODES )) && MAX_NODES=$n; done
if (( MAX_NODES + 64 > FD_LIMIT )); then
  echo "warning: ulimit -n is $FD_LIMIT; ddprund needs one descriptor per agent ($MAX_NODES)" >&2
fi
# Each agent is one thread, and one more (its heartbeat thread) once it joined: threads count
# against kernel.pid_max machine-wide.
PID_MAX="$(cat /proc/sys/kernel/pid_max 2>/dev/null || echo 4194304)"
if (( 2 * MAX_NODES + 2000 > PID_MAX )); then
  echo "note: kernel.pid_max is $PID_MAX; $MAX_NODES agents need up to $((2 * MAX_NODES)) threads" >&2
fi
AGENT_PREFIX=()
if [[ "$AGENT_SCHED" == batch ]] && command -v chrt > /dev/null; then AGENT_PREFIX=(chrt --batch 0); fi

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
LOAD_BEFORE="$(cut -d' ' -f1-3 /proc/loadavg)"
run=0

for n in $NODES; do
  for _ in $(seq "$REPEAT"); do
    run=$((run + 1))
    "${AGENT_PREFIX[@]}" "$BUILD/bin/rendezvous_scale" --port "$PORT" --nodes "$n" \
      --agents-per-process "$AGENTS_PER_PROCESS" --daemon-pid "$DAEMON_PID" \
      --run-id "join-$run" >> "$RESULTS"
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

"$PY" - "$RESULTS" "$(nproc)" "$LOAD_BEFORE" <<'PYEOF'
import json, statistics, sys
rows = [json.loads(l) for l in open(sys.argv[1]) if l.strip()]
print(f"\nRendezvous join: N agents on one {sys.argv[2]}-core machine, loopback; median of runs, ms "
      f"(load average before: {sys.argv[3]})\n")
print("| agents | ddprun (all joined) | ddprun first / median agent | CPU meanwhile: ddprund / agents | agent processes | torch 1.13 c10d (all joined) |")
print("|---:|---:|---:|---:|---:|---:|")
ns = sorted({r["nodes"] for r in rows if r["mode"] == "join"})
for n in ns:
    ours = [r for r in rows if r["mode"] == "join" and r["impl"] == "ddprun" and r["nodes"] == n]
    torch = [r for r in rows if r["mode"] == "join" and r["impl"] != "ddprun" and r["nodes"] == n]
    med = lambda key, rs: statistics.median(r[key] for r in rs)
    o = f"{med('join_ms', ours):.0f}" if ours else "—"
    of = f"{med('first_ms', ours):.0f} / {med('median_ms', ours):.0f}" if ours else "—"
    cpu = f"{med('daemon_cpu_ms', ours):.0f} / {med('agents_cpu_ms', ours):.0f}" if ours else "—"
    procs = f"{ours[0]['processes']}" if ours else "—"
    t = "—" if not torch else ("failed/timeout" if torch[0]["join_ms"] is None else f"{torch[0]['join_ms']:.0f}")
    print(f"| {n} | {o} | {of} | {cpu} | {procs} | {t} |")
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
