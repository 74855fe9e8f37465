"""Multi-node scenarios with every host in a network namespace of its own (root only; exit 77
otherwise): `multinode_netns_test.py ranks|ranks_local_addr|partition`.

A bridge and namespaces named from this pid, a 10.217.<pid % 250 + 1>.0/24 subnet; ddprund in
namespace "d", agents in "a", "b" (and "c"). Everything is deleted on every exit path
(multinode_harness.Harness.delete_netns). The label netns: docs/development.md#tests.
"""
import os
import shutil
import subprocess
import sys
import time

sys.dont_write_bytecode = True  # nothing written into the source tree
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from multinode_harness import RDZV_CONF, TMP, alive, c10d, check, poll  # noqa: E402
from multinode_test import check_ranks, main  # noqa: E402


def start(h, hosts, nnodes, run_id, env, local_addr, conf=RDZV_CONF):
    """ddprund in namespace d, one agent per host in its own; with local_addr each agent gets
    --local-addr <its IP>, else it must find the address itself."""
    ips = h.make_netns(["d"] + hosts)
    port = h.ddprund(netns=ips["d"][0], host=ips["d"][1])
    agents = {}
    for n in hosts:
        extra = ["--local-addr", ips[n][1]] if local_addr else []
        agents[n] = h.agent(n, c10d(port, nnodes, 1, run_id=run_id, host=ips["d"][1], conf=conf,
                                     extra=extra),
                            env, netns=ips[n][0])
    return ips, agents


def scenario_ranks(h, local_addr):
    """2 agents in namespaces: ranks and world across nodes; MASTER_ADDR is the namespace IP of
    node rank 0 and the worker store is reachable there from every node."""
    ips, agents = start(h, ["a", "b"], 2, "nsranks", {"MN_REACH": "1"}, local_addr)
    for n, p in agents.items():
        rc = h.wait_exit(p, n, 45)
        check(rc == 0, "agent %s exited %d:\n%s" % (n, rc, h.output(n)[-3000:]))
    recs = h.records()
    check_ranks(recs, {"a": 1, "b": 1})
    host0 = next(r["node"] for r in recs if r["GROUP_RANK"] == "0")
    for r in recs:
        check(r["MASTER_ADDR"] == ips[host0][1],
              "node %s: MASTER_ADDR=%s, want %s (node rank 0's namespace IP)" %
              (r["node"], r["MASTER_ADDR"], ips[host0][1]))
        check(r["reach"], "node %s cannot reach the worker store at %s:%s" %
              (r["node"], r["MASTER_ADDR"], r["MASTER_PORT"]))


def scenario_partition(h):
    """3 agents in a 2:3 job; one agent's link goes down: its workers are stopped and the other
    two continue as a 2-node job."""
    go = os.path.join(TMP, "go")
    # A cut-off agent notices when a store call gives up: read_timeout, not heartbeat_timeout.
    conf = RDZV_CONF.replace("read_timeout=10", "read_timeout=3")
    ips, agents = start(h, ["a", "b", "c"], "2:3", "nspart", {"MN_GO_FILE": go}, True, conf)
    gen0 = poll("3 workers with WORLD_SIZE=3", lambda: h.generation_with_world(3, "abc"), 40)
    victim = next(r for r in gen0 if r["GROUP_RANK"] != "0")["node"]
    victims = [r["pid"] for r in gen0 if r["node"] == victim]
    t_cut = time.monotonic()
    subprocess.run(["ip", "-n", ips[victim][0], "link", "set", "eth0", "down"], check=True)
    h.log("link of %s down" % victim)
    rest = [n for n in "abc" if n != victim]
    new = poll("a 2-node generation of %s" % rest, lambda: h.generation_with_world(2, rest), 30)
    h.log("survivors restarted as WORLD_SIZE=2 after %.2f s" % (time.monotonic() - t_cut))
    check_ranks(new, {n: 1 for n in rest}, restart=int(new[0]["TORCHELASTIC_RESTART_COUNT"]))
    poll("the partitioned node's workers to stop", lambda: not any(alive(p) for p in victims), 30)
    h.log("partitioned node's workers stopped after %.2f s" % (time.monotonic() - t_cut))
    rc = h.wait_exit(agents[victim], victim, 30)
    h.log("partitioned agent exited %d after %.2f s" % (rc, time.monotonic() - t_cut))
    check(rc != 0 and "lost the rendezvous store" in h.output(victim),
          "the partitioned agent exited %d without 'lost the rendezvous store':\n%s" %
          (rc, h.output(victim)[-2000:]))
    with open(go, "w") as f:
        f.write("2")
    for n in rest:
        rc = h.wait_exit(agents[n], n, 30)
        check(rc == 0, "survivor %s exited %d:\n%s" % (n, rc, h.output(n)[-3000:]))


if __name__ == "__main__":
    if os.geteuid() != 0 or not shutil.which("ip") or not shutil.which("nsenter"):
        print("SKIP: needs root, ip and nsenter")
        sys.exit(77)
    sys.exit(main(sys.argv, {
        "ranks": lambda h: scenario_ranks(h, False),
        "ranks_local_addr": lambda h: scenario_ranks(h, True),
        "partition": scenario_partition,
    }))
