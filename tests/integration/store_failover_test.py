"""Store failover on loopback (issue 11, item 3): `store_failover_test.py SCENARIO`.

Self-hosted c10d (no ddprund): the first agent hosts the rendezvous store on the endpoint's port.
Four agents `--nnodes=3:4 --max-restarts=0`; once generation 0 runs with 4 nodes, kill -9 of the
hosting agent. The other three move the store to the lowest surviving node, form a 3-node world
and finish (exit 0: with --max-restarts=0 a spent restart would fail the job).
  plain   workers wait for the release file: the survivors learn of the loss through their
          heartbeats (kStoreLost after heartbeat_timeout)
  torch   workers run a gloo all_reduce loop: they fail with connection errors at once, and the
          agents' next store call fails (the NetworkError path)
"""
import os
import signal
import socket
import sys
import time

sys.dont_write_bytecode = True  # nothing written into the source tree
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from multinode_harness import RDZV_CONF, TMP, alive, check, poll  # noqa: E402
from multinode_test import check_ranks, main  # noqa: E402


def free_port():
    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    port = s.getsockname()[1]
    s.close()
    return port


def failover(h, torch):
    port = free_port()
    go = os.path.join(TMP, "go")
    env = {"MN_GO_FILE": go}
    if torch:
        env["MN_TORCH_LOOP"] = "1"
    flags = ["--nnodes", "3:4", "--nproc-per-node", "1", "--rdzv-backend", "c10d",
             "--rdzv-endpoint", "127.0.0.1:%d" % port, "--rdzv-id", "failover",
             "--rdzv-conf", RDZV_CONF, "--max-restarts", "0"]
    agents = {"a": h.agent("a", flags, env)}
    poll("agent a to host the store", lambda: "rendezvous store: listening" in h.output("a"), 30)
    for n in "bcd":
        agents[n] = h.agent(n, flags, env)
    gen0 = poll("4 workers with WORLD_SIZE=4", lambda: h.generation_with_world(4, "abcd"), 40)
    victims = [r["pid"] for r in gen0 if r["node"] == "a"]
    t_kill = time.monotonic()
    agents["a"].send_signal(signal.SIGKILL)
    agents["a"].wait()
    h.log("killed agent a, the store's host (its node rank: %s)" %
          next(r["GROUP_RANK"] for r in gen0 if r["node"] == "a"))
    rest = "bcd"
    new = poll("a 3-node generation of %s" % rest, lambda: h.generation_with_world(3, rest), 40)
    took = time.monotonic() - t_kill
    h.log("survivors run as WORLD_SIZE=3 (generation %s) %.2f s after the kill" %
          (new[0]["TORCHELASTIC_RESTART_COUNT"], took))
    check_ranks(new, {n: 1 for n in rest}, restart=int(new[0]["TORCHELASTIC_RESTART_COUNT"]))
    check(int(new[0]["TORCHELASTIC_RESTART_COUNT"]) >= 1, "the generation did not move on")
    poll("the killed agent's workers to exit", lambda: not any(alive(p) for p in victims), 15)
    with open(go, "w") as f:
        f.write("3")
    for n in rest:
        rc = h.wait_exit(agents[n], n, 40)
        check(rc == 0, "survivor %s exited %d:\n%s" % (n, rc, h.output(n)[-3000:]))
    hosts = [n for n in rest if "this node hosts the rendezvous store now" in h.output(n)]
    check(len(hosts) == 1, "one survivor should host the moved store, got %s" % hosts)
    for n in rest:
        out = h.output(n)
        check("budget" not in out, "survivor %s: a restart was charged:\n%s" % (n, out[-2000:]))
        check("lost the rendezvous store hosted by the agent" in out,
              "survivor %s does not say the store's host was lost:\n%s" % (n, out[-2000:]))
    h.log("the store moved to %s; the job finished on 3 nodes, no restart spent" % hosts[0])


SCENARIOS = {
    "plain": lambda h: failover(h, False),
    "torch": lambda h: failover(h, True),
}

if __name__ == "__main__":
    sys.exit(main(sys.argv, SCENARIOS))
