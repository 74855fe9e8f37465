"""Rounds, dropped nodes and run-id lifecycle with real ddprun/ddprund processes (issue 9):
`multinode_lifecycle_test.py SCENARIO`.

  scale_up_split     1:2, last_call 0.5 s, the second agent after the first one's world formed,
                     10 times: one world of 1, then one world of 2 -- never two worlds of 1
  dropped_timeout    1:2, join_timeout 5 s: SIGSTOP agent b; a times out joining alone, withdraws
                     and exits 1; SIGCONT b: b runs as a world of 1 (not "rank 1 of 2" with nobody)
  dropped_succeeded  SIGSTOP b; a goes on alone and succeeds; SIGCONT b: b says it was dropped and
                     exits 0
  dropped_failed     the same, but a's workers fail (budget 0): b prints the job's summary and
                     exits with its code
  lost_rejoins       4 agents 3:4, keep-alive 0.5 s x 3: SIGSTOP one, the others go on as 3; SIGCONT
                     it: it rejoins as a newcomer and the job ends as a world of 4
  reuse              a run id whose job succeeded, then one whose job failed, relaunched: a fresh
                     job runs its workers each time; ddprund holds 3 keys per run id afterwards
                     (inc, ended, history)
  foreign_store      an agent of run jobB reaching a store hosted by an agent of run jobA exits 1 at
                     once with the DDP_SLURM_PORT hint; jobA is undisturbed
  peer_loss_free     3 agents 2:3, --max-restarts=0, gloo workers: kill -9 one agent; the survivors'
                     workers fail with connection errors (collateral), no restart is spent and the
                     job finishes on 2 nodes
  half_joined        2:4, last_call 5 s: a and b run generation 0; c scales the job up; once round
                     1 holds all three join records, kill -9 node rank 0's agent (before the last
                     call): round 1 forms of the 2 living agents (its record was withdrawn by
                     ddprund's ON_CLOSE), their generation-1 workers start, and the job's history
                     has generations 0 and 1
  foreign_end        a 2-node job; a client that is no agent writes the job's end markers (what
                     tests/integration/foreign_client.py end-jobs does): both agents exit 85 and
                     their summaries name the rendezvous' reason as the root cause, not a stopped
                     worker's 143
"""
import os
import signal
import socket
import sys
import time

sys.dont_write_bytecode = True  # nothing written into the source tree
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import multinode_test  # noqa: E402
import json  # noqa: E402
import subprocess  # noqa: E402
from multinode_harness import (PY, RDZV_CONF, SRC, TMP, c10d, check,  # noqa: E402
                               failure_summary, poll, root_cause, store_values)

JOB_ENDED_BY_RENDEZVOUS_EXIT = 85  # docs/running.md "Exit codes"
from multinode_test import check_ranks, main  # noqa: E402


def release(name, world):
    with open(os.path.join(TMP, name), "w") as f:
        f.write(str(world))


def exited(h, p, name, want, timeout=45):
    rc = h.wait_exit(p, name, timeout)
    check(rc == want, "agent %s exited %d, want %d:\n%s" % (name, rc, want, h.output(name)[-3000:]))


def start_pair(h, port, run_id, conf=RDZV_CONF, env_extra=None, extra=()):
    """Agents a and b of a 1:2 job, both in their first world of 2."""
    env = {"MN_GO_FILE": os.path.join(TMP, "go")}
    env.update(env_extra or {})
    flags = c10d(port, "1:2", 1, run_id=run_id, conf=conf, extra=list(extra))
    agents = {n: h.agent(n, flags, env) for n in ("a", "b")}
    poll("a world of 2", lambda: h.generation_with_world(2, "ab"), 40)
    return agents


def scenario_scale_up_split(h):
    port = h.ddprund()
    # The running agent notices the scale-up up to one keep-alive (2 s) late, well after the
    # newcomer's 0.5 s last call: without the closing rule the newcomer closes a round alone.
    conf = ("join_timeout=20,last_call_timeout=0.5,close_timeout=5,keep_alive_interval=2,"
            "heartbeat_timeout=10,read_timeout=10")
    for i in range(10):
        a, b, go = "a%d" % i, "b%d" % i, "go%d" % i
        env = {"MN_GO_FILE": os.path.join(TMP, go)}
        flags = c10d(port, "1:2", 1, run_id="split%d" % i, conf=conf)
        pa = h.agent(a, flags, env)
        poll("%s's world of 1" % a, lambda: h.records(node=a), 30)
        pb = h.agent(b, flags, env)
        both = poll("a world of 2", lambda: h.generation_with_world(2, [a, b]), 30)
        release(go, 2)
        exited(h, pa, a, 0)
        exited(h, pb, b, 0)
        worlds = sorted((int(r["TORCHELASTIC_RESTART_COUNT"]), r["node"], int(r["WORLD_SIZE"]))
                        for r in h.records(node=a) + h.records(node=b))
        h.log("run %d: (generation, node, world) %s" % (i, worlds))
        gen = int(both[0]["TORCHELASTIC_RESTART_COUNT"])
        check(worlds == [(0, a, 1), (gen, a, 2), (gen, b, 2)] and gen == 1,
              "run %d: two worlds at once or an extra round: %s" % (i, worlds))


def scenario_dropped_timeout(h):
    port = h.ddprund()
    conf = RDZV_CONF.replace("join_timeout=20", "join_timeout=5").replace(
        "last_call_timeout=0.5", "last_call_timeout=30")
    agents = start_pair(h, port, "dropto", conf)
    os.kill(agents["b"].pid, signal.SIGSTOP)
    h.log("SIGSTOP b")
    exited(h, agents["a"], "a", 1, 30)
    out = h.output("a")
    check("join_timeout" in out and "withdrew" in out, "a's timeout is not explained:\n" + out[-2000:])
    os.kill(agents["b"].pid, signal.SIGCONT)
    h.log("SIGCONT b")
    alone = poll("b's world of 1", lambda: h.generation_with_world(1, "b"), 30)
    check(alone[0]["GROUP_WORLD_SIZE"] == "1" and alone[0]["GROUP_RANK"] == "0",
          "b formed %s" % alone[0])
    release("go", 1)
    exited(h, agents["b"], "b", 0)
    check("declared lost" in h.output("b"), "b does not say it was declared lost")


def scenario_dropped(h, fails):
    port = h.ddprund()
    env = {"MN_FAIL_RANK": "0", "MN_FAIL_FROM": "1", "MN_FAIL_CODE": "7"} if fails else {}
    agents = start_pair(h, port, "dropped", env_extra=env, extra=["--max-restarts", "0"])
    os.kill(agents["b"].pid, signal.SIGSTOP)
    h.log("SIGSTOP b")
    poll("a's world of 1", lambda: h.generation_with_world(1, "a"), 30)
    release("go", 1)
    exited(h, agents["a"], "a", 7 if fails else 0)
    os.kill(agents["b"].pid, signal.SIGCONT)
    h.log("SIGCONT b")
    exited(h, agents["b"], "b", 7 if fails else 0)
    out = h.output("b")
    check("dropped from the job" in out, "b does not say it was dropped:\n" + out[-2000:])
    if fails:
        check("Root Cause" in out and "failed on another node" not in out,
              "b did not print the job's summary:\n" + out[-2000:])
    else:
        check("succeeded" in out, "b does not say the job succeeded:\n" + out[-2000:])


def scenario_lost_rejoins(h):
    port = h.ddprund()
    conf = ("join_timeout=30,last_call_timeout=0.5,close_timeout=5,keep_alive_interval=0.5,"
            "keep_alive_max_attempt=3,heartbeat_timeout=1.5,read_timeout=10")
    env = {"MN_GO_FILE": os.path.join(TMP, "go")}
    flags = c10d(port, "3:4", 1, run_id="comeback", conf=conf)
    agents = {n: h.agent(n, flags, env) for n in "abcd"}
    gen0 = poll("a world of 4", lambda: h.generation_with_world(4, "abcd"), 40)
    victim = next(r for r in gen0 if r["GROUP_RANK"] != "0")["node"]
    rest = [n for n in "abcd" if n != victim]
    os.kill(agents[victim].pid, signal.SIGSTOP)
    t_stop = time.monotonic()
    three = poll("a world of 3", lambda: h.generation_with_world(3, rest), 30)
    h.log("SIGSTOP %s: a world of 3 after %.2f s" % (victim, time.monotonic() - t_stop))
    os.kill(agents[victim].pid, signal.SIGCONT)
    gen3 = int(three[0]["TORCHELASTIC_RESTART_COUNT"])

    def four_again():
        recs = [r for r in h.records() if int(r["TORCHELASTIC_RESTART_COUNT"]) > gen3 and
                r["WORLD_SIZE"] == "4"]
        return recs if len({r["node"] for r in recs}) == 4 else None
    new = poll("a world of 4 again", four_again, 30)
    check_ranks(new, {n: 1 for n in "abcd"}, restart=int(new[0]["TORCHELASTIC_RESTART_COUNT"]))
    release("go", 4)
    for n, p in agents.items():
        exited(h, p, n, 0)
    check("declared lost" in h.output(victim), "%s does not say it was declared lost" % victim)


def ddprund_keys_at_stop(h):
    """Stops ddprund (SIGTERM) and returns the key count it logs on the way out."""
    name, p = next((n, p) for n, p in h.procs if n == "ddprund")
    p.send_signal(signal.SIGTERM)
    h.wait_exit(p, name, 15)
    line = next(l for l in h.output(name).splitlines() if "keys held" in l)
    return int(line.split("(")[-1].split()[0])


def run_job(h, port, run_id, names, env=None, want=0, extra=()):
    flags = c10d(port, 2, 1, run_id=run_id, extra=list(extra))
    agents = {n: h.agent(n, flags, env) for n in names}
    for n, p in agents.items():
        exited(h, p, n, want)


def scenario_reuse(h):
    port = h.ddprund()
    run_job(h, port, "reuse", ("a1", "b1"))
    run_job(h, port, "reuse", ("a2", "b2"))  # a fresh job: its workers run
    check(len(h.records(node="a2")) == 1 and len(h.records(node="b2")) == 1,
          "the relaunch after success ran no worker")
    check(any("run id reuse ended at" in h.output(n) and "(succeeded); starting a new job" in
              h.output(n) for n in ("a2", "b2")), "no agent said it starts a new job")
    fail = {"MN_FAIL_RANK": "0", "MN_FAIL_CODE": "7"}
    run_job(h, port, "reusef", ("a3", "b3"), fail, want=7, extra=["--max-restarts", "0"])
    run_job(h, port, "reusef", ("a4", "b4"))  # not a crash loop: a fresh job
    check(len(h.records(node="a4")) == 1 and len(h.records(node="b4")) == 1,
          "the relaunch after a failure ran no worker")
    check(any("(failed); starting a new job" in h.output(n) for n in ("a4", "b4")),
          "no agent said the failed job ended")
    keys = ddprund_keys_at_stop(h)
    h.log("ddprund holds %d keys after 4 jobs of 2 run ids" % keys)
    check(keys == 6, "ddprund holds %d keys, want 6 (per run id: inc, ended, history)" % keys)


def scenario_foreign_store(h):
    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    port = s.getsockname()[1]
    s.close()
    env = {"MN_GO_FILE": os.path.join(TMP, "go")}
    pa = h.agent("a", c10d(port, "1:2", 1, run_id="jobA"), env)
    poll("jobA's worker", lambda: h.records(node="a"), 30)
    t0 = time.monotonic()
    pb = h.agent("b", c10d(port, "1:2", 1, run_id="jobB", conf=RDZV_CONF + ",is_host=false"), env)
    exited(h, pb, "b", 1, 15)
    took = time.monotonic() - t0
    out = h.output("b")
    h.log("jobB's agent stopped after %.2f s" % took)
    check(took < 5, "jobB's agent took %.1f s to notice" % took)
    check("belongs to run 'jobA'" in out and "DDP_SLURM_PORT" in out,
          "no clear message:\n" + out[-2000:])
    check(not h.records(node="b"), "jobB ran a worker on jobA's store")
    release("go", 1)
    exited(h, pa, "a", 0)
    check(len(h.records(node="a")) == 1, "jobA was disturbed: %s" % h.records(node="a"))


def scenario_peer_loss_free(h):
    port = h.ddprund()
    env = {"MN_GO_FILE": os.path.join(TMP, "go"), "MN_TORCH_LOOP": "1"}
    flags = c10d(port, "2:3", 1, run_id="lossfree", extra=["--max-restarts", "0"])
    agents = {n: h.agent(n, flags, env) for n in "abc"}
    gen0 = poll("a world of 3", lambda: h.generation_with_world(3, "abc"), 60)
    victim = next(r for r in gen0 if r["GROUP_RANK"] != "0")["node"]
    rest = [n for n in "abc" if n != victim]
    agents[victim].send_signal(signal.SIGKILL)
    agents[victim].wait()
    h.log("killed agent %s" % victim)
    poll("a world of 2", lambda: h.generation_with_world(2, rest), 60)
    release("go", 2)
    for n in rest:
        exited(h, agents[n], n, 0, 60)
    logs = {n: h.output(n) for n in rest}
    check(not any("budget" in out for out in logs.values()), "a restart was charged")
    # Either the dead agent's closed connection ended the round before the survivors' workers hit
    # the broken collective (they were only stopped), or the workers failed first and their
    # connection errors were taken as collateral; both cost nothing and name the lost node.
    lost = ("lost its connection to the rendezvous store", "sent no heartbeat")
    check(all(any(why in out for why in lost) or "collateral" in out for out in logs.values()),
          "a survivor did not learn that a peer was lost")
    check(all(any(why in out for why in lost) for out in logs.values()),
          "the lost node is not named")


def scenario_half_joined(h):
    port = h.ddprund()
    conf = RDZV_CONF.replace("last_call_timeout=0.5", "last_call_timeout=5")
    check(conf != RDZV_CONF, "RDZV_CONF has no last_call_timeout=0.5 to widen")
    flags = c10d(port, "2:4", 1, run_id="half", conf=conf)
    go = {"MN_GO_FILE": os.path.join(TMP, "go")}
    agents = {n: h.agent(n, flags, go) for n in ("a", "b")}
    gen0 = poll("generation 0 of a and b", lambda: h.generation_with_world(2, "ab"), 60)
    victim = next(r for r in gen0 if r["GROUP_RANK"] == "0")["node"]
    agents["c"] = h.agent("c", flags, go)  # a scale-up: round 1 of a, b and c
    records = r"^rdzv/half/\d+/r/1/node/\d+$"
    poll("round 1's 3 join records", lambda: len(store_values(port, records)) == 3, 60)
    state = store_values(port, r"^rdzv/half/\d+/r/1/(count|closer)$")
    check(not any(k.endswith("closer") for k in state) and
          all(int(v) < 10 ** 9 for v in state.values()),
          "round 1 closed before the kill (last_call_timeout too short here): %s" % state)
    agents[victim].send_signal(signal.SIGKILL)
    h.log("SIGKILL agent %s (node rank 0 of generation 0) after its join to round 1" % victim)
    survivors = "".join(n for n in "abc" if n != victim)
    gen1 = poll("a generation of %s with world 2" % survivors,
                lambda: h.generation_with_world(2, survivors), 60)
    gens = sorted({r["TORCHELASTIC_RESTART_COUNT"] for r in gen1})
    check(gens == ["1"], "the survivors' world of 2 is generation %s, want 1 (round 1 had a dead "
          "member)" % gens)
    check(not h.records(restart=1) or all(r["WORLD_SIZE"] == "2" for r in h.records(restart=1)),
          "generation 1 ran with a world of 3")
    release("go", 2)
    for n in survivors:
        exited(h, agents[n], n, 0)
    history = store_values(port, r"^rdzv/half/\d+/history$")
    check(len(history) == 1, "no history key: %s" % history)
    entries = [json.loads(line) for line in list(history.values())[0].splitlines() if line]
    check([e["generation"] for e in entries] == [0, 1],
          "the history has generations %s, want [0, 1]" % [e["generation"] for e in entries])


def scenario_foreign_end(h):
    port = h.ddprund()
    agents = start_pair(h, port, "foreign")
    out = subprocess.run([PY, os.path.join(SRC, "tests", "integration", "foreign_client.py"),
                          "127.0.0.1", str(port), "end-jobs"], capture_output=True, text=True,
                         timeout=30)
    h.log("foreign client -> %d: %s" % (out.returncode, out.stdout.strip()))
    check(out.returncode == 0, "the foreign client was not served: %s" % out.stdout)
    for n in agents:
        exited(h, agents[n], n, JOB_ENDED_BY_RENDEZVOUS_EXIT)
        cause = root_cause(failure_summary(h.output(n)))
        check("rendezvous: the rendezvous ended the job: ended by a foreign client" in cause and
              "exitcode  : %d" % JOB_ENDED_BY_RENDEZVOUS_EXIT in cause and "143" not in cause,
              "agent %s: the root cause is not the rendezvous' reason:\n%s" % (n, cause))


SCENARIOS = {
    "scale_up_split": scenario_scale_up_split,
    "dropped_timeout": scenario_dropped_timeout,
    "dropped_succeeded": lambda h: scenario_dropped(h, False),
    "dropped_failed": lambda h: scenario_dropped(h, True),
    "lost_rejoins": scenario_lost_rejoins,
    "reuse": scenario_reuse,
    "foreign_store": scenario_foreign_store,
    "peer_loss_free": scenario_peer_loss_free,
    "half_joined": scenario_half_joined,
    "foreign_end": scenario_foreign_end,
}

if __name__ == "__main__":
    multinode_test.SCENARIO_BUDGET_S = 150  # scale_up_split runs ten jobs
    sys.exit(main(sys.argv, SCENARIOS))
