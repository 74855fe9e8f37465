"""Liveness of real ddprun agents against a real ddprund (issue 9, items 1, 3 and 8):
`liveness_test.py SCENARIO` runs one scenario and exits 0 (pass) or 1 (fail, with the logs);
`liveness_test.py measure SCENARIO N` repeats a timed scenario N times and prints the figures.

  busy        2 agents x 2 CPU-spinning workers for 60 s with the default --rdzv-conf: no round
              ends, no restart (a busy node is never "lost").
  store_stop  SIGSTOP ddprund: every agent reports the store lost within heartbeat_timeout + 1 s
              (keep-alive 0.5 s x 3 = 1.5 s), never after read_timeout.
  agent_kill  4 agents --nnodes=3:4, keep-alive 0.5 s x 3: SIGKILL one agent; the survivors form a
              3-node world within 2.5 s, because the dead agent's heartbeat connection closed
              (ddprun's ON_CLOSE), not because its heartbeat went silent; no restart is spent.
  stall_{short,default}_{0.7,1.3}
              3 agents x 1 worker; ddprund SIGSTOPped for 0.7 or 1.3 x heartbeat_timeout, at the
              short conf (keep-alive 1 s x 3 = 3 s) or the default one (5 s x 3 = 15 s). 0.7: no
              round ends and no worker restarts (every node beats twice after SIGCONT, then the
              job is released and succeeds in generation 0); 1.3: every agent reports the store
              lost before SIGCONT, none reports a node lost; each exits 86 with the lost store
              as its summary's root cause.

Times are bounds measured on this script's monotonic clock from the signal to the log line (or
worker record) that shows the outcome; logs are polled every 20 ms. Processes are started and
stopped by pid through multinode_harness.Harness.
"""
import os
import re
import signal
import statistics
import sys
import time

sys.dont_write_bytecode = True  # nothing written into the source tree
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from multinode_harness import (BIN, PY, SRC, TMP, WORKER, Harness, TestFailure,  # noqa: E402
                               c10d, check, failure_summary, poll, root_cause, store_values)

SPIN_WORKER = os.path.join(SRC, "tests", "integration", "spin_worker.py")
STORE_LOST_EXIT = 86  # docs/running.md "Exit codes"
STALL_CONFS = {  # name -> (--rdzv-conf, heartbeat_timeout, keep_alive_interval in s)
    "short": ("keep_alive_interval=1,keep_alive_max_attempt=3", 3.0, 1.0),
    "default": (None, 15.0, 5.0),
}
# Small keep-alive so that the bounds below are seconds, with a join budget that still holds on a
# busy 2-core machine. heartbeat_timeout is given explicitly (= 0.5 x 3) so the bound is known.
FAST_CONF = ("join_timeout=30,last_call_timeout=0.5,close_timeout=5,keep_alive_interval=0.5,"
             "keep_alive_max_attempt=3,heartbeat_timeout=1.5,read_timeout=60")
HEARTBEAT_TIMEOUT = 1.5
STORE_LOST_BOUND = HEARTBEAT_TIMEOUT + 1.0
NEW_WORLD_BOUND = 2.5


def spawn_agent(h, name, flags, worker_argv, env_extra=None):
    env = dict(os.environ)
    env.update({"MN_DIR": TMP, "MN_NODE": name, "PYTHON_EXEC": PY, "DDP_NO_SLURM": "1"})
    env.update(env_extra or {})
    return h.spawn(name, [os.path.join(BIN, "ddprun")] + flags + ["--shutdown-timeout", "5"] +
                   worker_argv, env)


def wait_for_line(h, names, pattern, since, timeout):
    """Polls the logs of `names` (every 20 ms) until each has a line matching `pattern`; returns
    {name: seconds from `since` (monotonic) to when it was seen}."""
    seen = {}
    deadline = time.monotonic() + timeout
    regex = re.compile(pattern)
    while len(seen) < len(names):
        for n in names:
            if n not in seen and regex.search(h.output(n)):
                seen[n] = time.monotonic() - since
        if time.monotonic() > deadline:
            missing = [n for n in names if n not in seen]
            raise TestFailure("no line matching %r from %s within %.0f s" % (pattern, missing,
                                                                                timeout))
        time.sleep(0.02)
    return seen


def scenario_busy(h):
    port = h.ddprund()
    flags = ["--nnodes", "2", "--nproc-per-node", "2", "--rdzv-backend", "c10d",
             "--rdzv-endpoint", "127.0.0.1:%d" % port, "--rdzv-id", "busy", "--max-restarts", "3"]
    agents = {n: spawn_agent(h, n, flags, [PY, "-u", SPIN_WORKER]) for n in ("a", "b")}
    for n, p in agents.items():
        rc = h.wait_exit(p, n, 110)
        check(rc == 0, "agent %s exited %d:\n%s" % (n, rc, h.output(n)[-3000:]))
    restarts = sorted({r["TORCHELASTIC_RESTART_COUNT"] for r in h.records()})
    check(restarts == ["0"], "workers ran in generations %s, want only 0" % restarts)
    check(len(h.records()) == 4, "%d worker records, want 4" % len(h.records()))
    for n in agents:
        ended = [l for l in h.output(n).splitlines() if "rendezvous round" in l and "ended" in l]
        check(not ended, "agent %s saw a round end:\n%s" % (n, "\n".join(ended)))
    h.log("busy ok: 4 spinning workers for 60 s, generation 0 only, no round ended")


def scenario_store_stop(h):
    port = h.ddprund()
    flags = c10d(port, 2, 1, run_id="stop", conf=FAST_CONF)
    for n in ("a", "b"):
        spawn_agent(h, n, flags, [WORKER], {"MN_GO_FILE": os.path.join(TMP, "go")})
    poll("2 workers of generation 0", lambda: len(h.records(restart=0)) == 2, 40)
    daemon = next(p for name, p in h.procs if name == "ddprund")
    t_stop = time.monotonic()
    os.kill(daemon.pid, signal.SIGSTOP)
    h.log("SIGSTOP ddprund (pid %d)" % daemon.pid)
    try:
        seen = wait_for_line(h, ["a", "b"], r"round 0 ended: the rendezvous store has not answered",
                             t_stop, 30)
    finally:
        os.kill(daemon.pid, signal.SIGCONT)
    h.figure = max(seen.values())
    h.log("store lost reported after %s s (bound %.1f s)" %
          ({n: round(t, 2) for n, t in seen.items()}, STORE_LOST_BOUND))
    for n, took in seen.items():
        check(took <= STORE_LOST_BOUND, "agent %s reported the store lost after %.2f s, bound "
              "%.1f s (heartbeat_timeout %.1f s + 1 s)" % (n, took, STORE_LOST_BOUND,
                                                          HEARTBEAT_TIMEOUT))


def scenario_agent_kill(h, victim_rank="1"):
    port = h.ddprund()
    go = os.path.join(TMP, "go")
    flags = c10d(port, "3:4", 1, run_id="kill", conf=FAST_CONF, extra=["--max-restarts", "0"])
    names = ("a", "b", "c", "d")
    agents = {n: spawn_agent(h, n, flags, [WORKER], {"MN_GO_FILE": go}) for n in names}
    gen0 = poll("4 workers with WORLD_SIZE=4", lambda: h.generation_with_world(4, names), 40)
    victim = next(r for r in gen0 if r["GROUP_RANK"] == victim_rank)["node"]
    rest = [n for n in names if n != victim]
    t_kill = time.monotonic()
    agents[victim].send_signal(signal.SIGKILL)
    h.log("SIGKILL agent %s (group rank %s)" % (victim, victim_rank))
    detected = wait_for_line(h, rest, r"round 0 ended: .*lost its connection", t_kill, 30)
    formed = wait_for_line(h, rest, r"generation [1-9]\d*: node rank \d of 3,", t_kill, 30)
    took = h.figure = max(formed.values())
    new = poll("a 3-node generation of %s" % rest, lambda: h.generation_with_world(3, rest), 30)
    workers = time.monotonic() - t_kill
    h.log("the loss was seen after %s s, the 3-node world formed after %s s (bound %.1f s), its "
          "workers all ran after %.2f s" % ({n: round(t, 3) for n, t in detected.items()},
                                            {n: round(t, 2) for n, t in formed.items()},
                                            NEW_WORLD_BOUND, workers))
    check(took <= NEW_WORLD_BOUND, "the survivors formed a 3-node world after %.2f s, bound %.1f s"
          % (took, NEW_WORLD_BOUND))
    check(int(new[0]["TORCHELASTIC_RESTART_COUNT"]) >= 1, "no new generation")
    with open(go, "w") as f:
        f.write("3")
    for n in rest:  # --max-restarts=0: the job still succeeds, so the loss spent nothing
        rc = h.wait_exit(agents[n], n, 30)
        check(rc == 0, "survivor %s exited %d:\n%s" % (n, rc, h.output(n)[-3000:]))


def heartbeats(port, generation):
    """{node rank: heartbeat counter} of `generation`'s round in ddprund."""
    found = store_values(port, r"^rdzv/[^/]+/\d+/r/%d/hb/\d+$" % generation)
    return {int(k.rsplit("/", 1)[1]): int(v or "0") for k, v in found.items()}


def scenario_stall(h, conf_name, factor):
    conf, timeout, interval = STALL_CONFS[conf_name]
    port = h.ddprund()
    go = os.path.join(TMP, "go")
    flags = ["--nnodes", "3", "--nproc-per-node", "1", "--rdzv-backend", "c10d",
             "--rdzv-endpoint", "127.0.0.1:%d" % port, "--rdzv-id", "stall", "--max-restarts", "3"]
    if conf:
        flags += ["--rdzv-conf", conf]
    names = ("a", "b", "c")
    agents = {n: spawn_agent(h, n, flags, [WORKER], {"MN_GO_FILE": go}) for n in names}
    poll("3 workers of generation 0", lambda: len(h.records(restart=0)) == 3, 60)
    # In step: every node beat twice; the stall starts just after one of them beats again, so its
    # next beat falls into the stall (the case of issue 19).
    poll("2 heartbeats of every node", lambda: sorted(heartbeats(port, 0).values())[:1] >= [2] and
         len(heartbeats(port, 0)) == 3, 10 * interval + 30)
    before = heartbeats(port, 0)
    poll("a heartbeat", lambda: heartbeats(port, 0) != before, 2 * interval + 30)
    daemon = next(p for name, p in h.procs if name == "ddprund")
    stall = factor * timeout
    os.kill(daemon.pid, signal.SIGSTOP)
    t_stop = time.monotonic()
    h.log("SIGSTOP ddprund (pid %d) for %.1f s (%.1f x heartbeat_timeout %.0f s)" %
          (daemon.pid, stall, factor, timeout))
    try:
        time.sleep(stall)  # the fault itself: the store does not answer for this long
    finally:
        os.kill(daemon.pid, signal.SIGCONT)
    h.log("SIGCONT ddprund after %.2f s" % (time.monotonic() - t_stop))
    ended = r"rendezvous round 0 ended: (.*)"
    if factor < 1:
        def no_round_ended():
            for n in names:
                lines = re.findall(ended, h.output(n))
                check(not lines, "agent %s: a %.1f s stall (heartbeat_timeout %.0f s) ended the "
                      "round: %s" % (n, stall, timeout, lines))
        # Every node beats twice after the stall: each observer then had a whole tick on an
        # answering store, which is where a node would be (falsely) declared lost.
        after = heartbeats(port, 0)
        poll("2 heartbeats of every node after SIGCONT", lambda: no_round_ended() or all(
            v >= after[r] + 2 for r, v in heartbeats(port, 0).items()), 4 * interval + 30)
        no_round_ended()
        with open(go, "w") as f:
            f.write("3")
        for n in names:
            rc = h.wait_exit(agents[n], n, 60)
            check(rc == 0, "agent %s exited %d:\n%s" % (n, rc, h.output(n)[-3000:]))
        gens = sorted({r["TORCHELASTIC_RESTART_COUNT"] for r in h.records()})
        check(gens == ["0"], "workers ran in generations %s, want only 0" % gens)
        h.log("a %.1f s stall: no round ended, the job succeeded in generation 0" % stall)
        return
    for n in names:
        rc = h.wait_exit(agents[n], n, 60)
        lines = re.findall(ended, h.output(n))
        check(len(lines) == 1 and "rendezvous store has not answered" in lines[0],
              "agent %s (exit %d): want the store reported lost, not %s" % (n, rc, lines))
        check(rc == STORE_LOST_EXIT, "agent %s exited %d after losing the store, want %d" %
              (n, rc, STORE_LOST_EXIT))
        cause = root_cause(failure_summary(h.output(n)))
        check("rendezvous: the rendezvous store was lost" in cause and
              "exitcode  : %d" % STORE_LOST_EXIT in cause,
              "agent %s: the summary's root cause is not the lost store:\n%s" % (n, cause))
    h.log("a %.1f s stall: every agent reported the store lost (exit %d, the summary's root "
          "cause)" % (stall, STORE_LOST_EXIT))


SCENARIOS = {
    "busy": scenario_busy,
    "store_stop": scenario_store_stop,
    "agent_kill": scenario_agent_kill,
    "agent_kill_rank0": lambda h: scenario_agent_kill(h, "0"),
}
for _conf in STALL_CONFS:
    for _factor in (0.7, 1.3):
        SCENARIOS["stall_%s_%g" % (_conf, _factor)] = (
            lambda h, c=_conf, f=_factor: scenario_stall(h, c, f))


def run_one(name, budget):
    h = Harness()

    def interrupted(sig, _frame):
        raise TestFailure("%s: the scenario is stopped (its budget is %d s)" %
                          (signal.Signals(sig).name, budget))

    for sig in (signal.SIGALRM, signal.SIGTERM, signal.SIGINT, signal.SIGHUP):
        signal.signal(sig, interrupted)
    signal.alarm(budget)
    h.figure = None  # the scenario's timing, for `measure`
    try:
        SCENARIOS[name](h)
        h.log("PASS %s" % name)
        return True, h.figure
    except TestFailure as e:
        h.log("FAIL %s: %s" % (name, e))
        for proc_name, _ in h.procs:
            print("---- %s.log (tail) ----\n%s" % (proc_name, h.output(proc_name)[-2500:]))
        return False, h.figure
    finally:
        signal.alarm(0)
        for sig in (signal.SIGALRM, signal.SIGTERM, signal.SIGINT, signal.SIGHUP):
            signal.signal(sig, signal.SIG_IGN)  # nothing interrupts the clean-up
        h.stop_all()


def main(argv):
    if len(argv) == 2 and argv[1] in SCENARIOS:
        budget = 140 if argv[1] == "busy" else 120 if argv[1].startswith("stall_default") else 75
        return 0 if run_one(argv[1], budget)[0] else 1
    if len(argv) == 4 and argv[1] == "measure" and argv[2] in SCENARIOS:
        figures, failures = [], 0
        for _ in range(int(argv[3])):
            ok, figure = run_one(argv[2], 75)
            failures += 0 if ok else 1
            if figure is not None:
                figures.append(figure)
        if figures:
            print("%s: n=%d min %.2f median %.2f max %.2f s, %d failed" %
                  (argv[2], len(figures), min(figures), statistics.median(figures),
                   max(figures), failures))
        return 1 if failures else 0
    print("usage: %s %s | measure SCENARIO N" % (argv[0], "|".join(SCENARIOS)), file=sys.stderr)
    return 2


if __name__ == "__main__":
    sys.exit(main(sys.argv))
