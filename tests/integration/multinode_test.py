"""Multi-node scenarios on loopback (issue 4, item 7): `multinode_test.py SCENARIO`.

Each scenario starts one ddprund and several ddprun agents (multinode_harness.py), checks what
the workers were given and how the agents ended, and exits 0 (pass) or 1 (fail, with the agents'
logs). Network-namespace scenarios live in multinode_netns_test.py.
"""
import os
import re
import signal
import sys
import time

sys.dont_write_bytecode = True  # nothing written into the source tree
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from multinode_harness import (HEARTBEAT_TIMEOUT, RDZV_CONF, TMP, alive, c10d,  # noqa: E402
                               check, poll, run_scenario)


SCENARIO_BUDGET_S = 75  # below every TIMEOUT in CMakeLists.txt (90 s and more)


def check_ranks(recs, nprocs, restart=0):
    """Every global rank exactly once, contiguous per node in GROUP_RANK order, WORLD_SIZE the
    sum of nprocs, the same restart count everywhere. nprocs: {node: nproc}."""
    world = sum(nprocs.values())
    check(sorted(int(r["RANK"]) for r in recs) == list(range(world)),
          "global ranks %s, want 0..%d once each" % (sorted(int(r["RANK"]) for r in recs),
                                                     world - 1))
    groups = {}
    for r in recs:
        check(int(r["WORLD_SIZE"]) == world, "WORLD_SIZE %s, want %d" % (r["WORLD_SIZE"], world))
        check(int(r["GROUP_WORLD_SIZE"]) == len(nprocs), "GROUP_WORLD_SIZE %s" % r["GROUP_WORLD_SIZE"])
        check(int(r["LOCAL_WORLD_SIZE"]) == nprocs[r["node"]], "LOCAL_WORLD_SIZE on %s" % r["node"])
        check(int(r["TORCHELASTIC_RESTART_COUNT"]) == restart, "restart count %s, want %d" %
              (r["TORCHELASTIC_RESTART_COUNT"], restart))
        groups.setdefault(int(r["GROUP_RANK"]), []).append(r)
    check(sorted(groups) == list(range(len(nprocs))), "GROUP_RANKs %s" % sorted(groups))
    base = 0
    for g in sorted(groups):
        nodes = {r["node"] for r in groups[g]}
        check(len(nodes) == 1, "GROUP_RANK %d on several agents %s" % (g, nodes))
        ranks = sorted((int(r["LOCAL_RANK"]), int(r["RANK"])) for r in groups[g])
        want = [(i, base + i) for i in range(nprocs[nodes.pop()])]
        check(ranks == want, "group %d (local, global) ranks %s, want %s" % (g, ranks, want))
        base += len(want)
    masters = {(r["MASTER_ADDR"], r["MASTER_PORT"]) for r in recs}
    check(len(masters) == 1, "workers disagree on the worker store: %s" % masters)


def scenario_ranks(h, nprocs):
    port = h.ddprund()
    agents = {n: h.agent(n, c10d(port, len(nprocs), k, run_id="ranks")) for n, k in nprocs.items()}
    for n, p in agents.items():
        rc = h.wait_exit(p, n, 45)
        check(rc == 0, "agent %s exited %d:\n%s" % (n, rc, h.output(n)[-3000:]))
    check_ranks(h.records(), nprocs)
    h.log("ranks ok: %s" % {r["node"] + "/" + r["LOCAL_RANK"]: r["RANK"] for r in h.records()})


def crash_flags(port, budget):
    return c10d(port, 2, 2, run_id="crash", extra=["--max-restarts", str(budget)])


def scenario_crash_restart(h):
    """Rank 3 fails in generation 0: both nodes restart into generation 1, which succeeds."""
    port = h.ddprund()
    env = {"MN_FAIL_RANK": "3", "MN_FAIL_UNTIL": "1"}
    agents = {n: h.agent(n, crash_flags(port, 2), env) for n in ("a", "b")}
    for n, p in agents.items():
        rc = h.wait_exit(p, n, 45)
        check(rc == 0, "agent %s exited %d:\n%s" % (n, rc, h.output(n)[-3000:]))
    check_ranks(h.records(restart=1), {"a": 2, "b": 2}, restart=1)
    # (other workers of generation 0 may be stopped before they record anything)
    check([r["RANK"] for r in h.records(restart=0) if r["RANK"] == "3"] == ["3"],
          "rank 3 did not run in generation 0")
    check(not h.records(restart=2), "a generation 2 ran after a single failure")
    for r in h.records():
        check(r["TORCHELASTIC_MAX_RESTARTS"] == "2", "TORCHELASTIC_MAX_RESTARTS")


def scenario_crash_budget(h):
    """Rank 1 always fails; --max-restarts=1 is job-wide: generations 0 and 1, then every agent
    fails with the same exit code and names the same root cause."""
    port = h.ddprund()
    env = {"MN_FAIL_RANK": "1", "MN_FAIL_CODE": "9"}
    agents = {n: h.agent(n, crash_flags(port, 1), env) for n in ("a", "b")}
    codes = {n: h.wait_exit(p, n, 45) for n, p in agents.items()}
    check(set(codes.values()) == {9}, "agents' exit codes %s, want 9 everywhere" % codes)
    gens = sorted({int(r["TORCHELASTIC_RESTART_COUNT"]) for r in h.records()})
    check(gens == [0, 1], "generations %s, want [0, 1] (budget 1, job-wide)" % gens)
    for g in gens:  # the others may be stopped before they record anything
        check([r["RANK"] for r in h.records(restart=g) if r["RANK"] == "1"] == ["1"],
              "rank 1 did not run (once) in generation %d" % g)
    causes = {}
    for n in agents:
        out = h.output(n)
        check("Root Cause" in out, "agent %s printed no root cause:\n%s" % (n, out[-2000:]))
        causes[n] = out[out.index("Root Cause"):].split("=====")[0]
        check(re.search(r"rank\s*:\s*1 \(local_rank: 1\)", causes[n]) and
              re.search(r"exitcode\s*:\s*9 ", causes[n]),
              "agent %s: root cause is not global rank 1 / exit 9:\n%s" % (n, causes[n]))
    check(len(set(causes.values())) == 1, "agents name different root causes: %s" % causes)


def scenario_agent_kill(h):
    """3 agents in a 2:3 job; SIGKILL one: the other two go on as a 2-node job within a few
    heartbeat timeouts, and the killed agent's workers are gone."""
    port = h.ddprund()
    go = os.path.join(TMP, "go")
    env = {"MN_GO_FILE": go}
    flags = c10d(port, "2:3", 1, run_id="kill", extra=["--max-restarts", "0"])  # not charged
    agents = {n: h.agent(n, flags, env) for n in ("a", "b", "c")}
    gen0 = poll("3 workers with WORLD_SIZE=3", lambda: h.generation_with_world(3, "abc"), 40)
    victim = next(r for r in gen0 if r["GROUP_RANK"] != "0")["node"]
    victims = [r["pid"] for r in gen0 if r["node"] == victim]
    t_kill = time.monotonic()
    agents[victim].send_signal(signal.SIGKILL)
    agents[victim].wait()
    h.log("killed agent %s (group rank != 0)" % victim)
    rest = [n for n in "abc" if n != victim]
    new = poll("a 2-node generation of %s" % rest, lambda: h.generation_with_world(2, rest), 30)
    took = time.monotonic() - t_kill
    h.log("survivors restarted as WORLD_SIZE=2 after %.2f s" % took)
    check(took < 4 * HEARTBEAT_TIMEOUT + 5, "survivors took %.1f s (heartbeat_timeout %g s)" %
          (took, HEARTBEAT_TIMEOUT))
    check_ranks(new, {n: 1 for n in rest}, restart=int(new[0]["TORCHELASTIC_RESTART_COUNT"]))
    poll("the killed agent's workers to exit", lambda: not any(alive(p) for p in victims), 15)
    with open(go, "w") as f:
        f.write("2")
    for n in rest:
        rc = h.wait_exit(agents[n], n, 30)
        check(rc == 0, "survivor %s exited %d:\n%s" % (n, rc, h.output(n)[-3000:]))


def scenario_scale_up(h):
    """2 agents run a 2:4 job with --max-restarts=0; a third agent joins: everyone restarts with
    WORLD_SIZE=3 (not charged to the budget) and the job succeeds."""
    port = h.ddprund()
    go = os.path.join(TMP, "go")
    env = {"MN_GO_FILE": go}
    flags = c10d(port, "2:4", 1, run_id="scale", extra=["--max-restarts", "0"])
    agents = {n: h.agent(n, flags, env) for n in ("a", "b")}
    poll("2 workers with WORLD_SIZE=2", lambda: h.generation_with_world(2, "ab"), 40)
    agents["c"] = h.agent("c", flags, env)
    new = poll("a 3-node generation", lambda: h.generation_with_world(3, "abc"), 40)
    gen = int(new[0]["TORCHELASTIC_RESTART_COUNT"])
    check(gen >= 1, "scale-up generation %d" % gen)
    check_ranks(new, {"a": 1, "b": 1, "c": 1}, restart=gen)
    with open(go, "w") as f:
        f.write("3")
    for n, p in agents.items():
        rc = h.wait_exit(p, n, 30)
        check(rc == 0, "agent %s exited %d:\n%s" % (n, rc, h.output(n)[-3000:]))


def scenario_too_few(h):
    """--nnodes=2 with a single agent: a clear timeout error, non-zero, within join_timeout."""
    port = h.ddprund()
    conf = RDZV_CONF.replace("join_timeout=20", "join_timeout=3")
    t0 = time.monotonic()
    p = h.agent("a", c10d(port, 2, 1, run_id="few", conf=conf))
    rc = h.wait_exit(p, "a", 3 + 25)
    took = time.monotonic() - t0
    out = h.output("a")
    h.log("alone: exit %d after %.2f s" % (rc, took))
    check(rc != 0, "a lone agent of a 2-node job exited 0")
    check("join_timeout" in out and "timed out" in out and "min_nodes=2" in out,
          "no clear timeout error:\n%s" % out[-2000:])
    check(not h.records(), "workers started without a quorum")


def scenario_static(h, hosted):
    """--rdzv-backend=static: --node-rank decides GROUP_RANK and the global ranks; node 1 starts
    first. hosted: node 0 hosts the store at --master-addr:--master-port (node 1 is told
    is_host=false and waits for it); else a ddprund listens there and no agent hosts."""
    if hosted:
        import socket
        s = socket.socket()
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
        s.close()
    else:
        port = h.ddprund()
    agents = {}
    for rank, name in ((1, "b"), (0, "a")):
        conf = "join_timeout=30" + (",is_host=false" if hosted and rank == 1 else "")
        agents[name] = h.agent(name, ["--nnodes", "2", "--nproc-per-node", "2", "--rdzv-backend",
                                      "static", "--node-rank", str(rank), "--master-addr",
                                      "127.0.0.1", "--master-port", str(port), "--rdzv-conf", conf])
        if rank == 1 and not hosted:  # (with is_host=false it logs nothing until connected)
            poll("node 1's log", lambda: os.path.getsize(os.path.join(TMP, "b.log")) > 0, 20)
    for n, p in agents.items():
        rc = h.wait_exit(p, n, 45)
        check(rc == 0, "agent %s exited %d:\n%s" % (n, rc, h.output(n)[-3000:]))
    if hosted:
        check("rendezvous store: listening" in h.output("a"), "node 0 did not host the store")
    recs = h.records()
    check_ranks(recs, {"a": 2, "b": 2})
    for r in recs:
        want = "0" if r["node"] == "a" else "1"
        check(r["GROUP_RANK"] == want, "node %s got GROUP_RANK %s, --node-rank %s" %
              (r["node"], r["GROUP_RANK"], want))


def scenario_torch(h):
    """A PyTorch gloo all_reduce across 2 agents (2 workers each)."""
    port = h.ddprund()
    env = {"MN_TORCH": "1"}
    agents = {n: h.agent(n, c10d(port, 2, 2, run_id="torch"), env) for n in ("a", "b")}
    for n, p in agents.items():
        rc = h.wait_exit(p, n, 55)
        check(rc == 0, "agent %s exited %d:\n%s" % (n, rc, h.output(n)[-3000:]))
    recs = h.records()
    check_ranks(recs, {"a": 2, "b": 2})
    sums = {r["allreduce"] for r in recs}
    check(sums == {10.0}, "all_reduce of rank+1 over 4 ranks gave %s, want 10" % sums)


SCENARIOS = {
    "ranks2": lambda h: scenario_ranks(h, {"a": 2, "b": 2}),
    "ranks4_mixed": lambda h: scenario_ranks(h, {"a": 1, "b": 3, "c": 2, "d": 1}),
    "crash_restart": scenario_crash_restart,
    "crash_budget": scenario_crash_budget,
    "agent_kill": scenario_agent_kill,
    "scale_up": scenario_scale_up,
    "too_few": scenario_too_few,
    "static": lambda h: scenario_static(h, False),
    "static_hosted": lambda h: scenario_static(h, True),
    "torch": scenario_torch,
}


def main(argv, scenarios):
    return run_scenario(argv, scenarios, budget_s=SCENARIO_BUDGET_S, tails=2500)


if __name__ == "__main__":
    sys.exit(main(sys.argv, SCENARIOS))
