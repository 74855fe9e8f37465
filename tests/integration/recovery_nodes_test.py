"""Recovery in place when a node is lost: real agents and real `train` workers (ddprun
--restart-scope=failed, --nnodes 1:2, 2 workers per node; shared helpers in recovery_test.py).

  recovery_nodes_test.py SCENARIO

  node_loss          2 nodes x 2 workers (nnodes 1:2): node 1's agent SIGKILLed; node 0's workers
                     keep their processes on world size 2; a new agent grows the world back to 4
  node_loss_spare    the same with a spare agent waiting: it takes the lost node's place
  node_stop          node 1's agent SIGSTOPped past the heartbeat timeout: node 0 goes on in place;
                     node 1, continued, drops its stale workers and rejoins; the world grows back
  node_cut           every host in a network namespace; node 1's link goes down: node 0 goes on in
                     place with world size 2 (no process restarted), node 1's agent stops its
                     workers and exits (the store lost); a new agent on node 1's host, the link up
                     again, grows the world back to 4 in place
  kill_after_form    a worker SIGKILLed as soon as a generation formed in place, while the workers
                     still rebuild: on node 0 right after node 1's agent was lost, then on the
                     newcomer right after a new agent grew the world back, then on node 0 again:
                     each is replaced in place (the announcements outlive the generation), node
                     0's other worker keeps its process throughout, no worker restarts
  round_ended        a round joined in place ends before node 0 published its worker store (a
                     test hold): node 1 joins the next round in place, nobody restarts
  excluded_in_place  node 1's workers fail twice (--exclude-after 2): the first is replaced in
                     place, the second makes node 1 leave for its cooldown while node 0 trains on
                     (world size 2); it joins again after the cooldown, the world back to 4

Every process started here is stopped by pid.
"""
import os
import signal
import subprocess
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from multinode_harness import (BIN, RDZV_CONF, TMP, alive, c10d, check,  # noqa: E402
                               json_lines, poll, workers)
from recovery_test import TRAIN, config, finish, job_status, last_step, run  # noqa: E402


def two_nodes(h, tag, extra_flags=(), epochs=60, nnodes="1:2", nproc=2, node0_env=None):
    """A ddprund and two agents of `nproc` workers (nnodes `nnodes`, restart scope failed) training
    on, agent `tag`0 as node rank 0 (with `node0_env` added to its environment), once rank 0 passed
    step 20. Returns both agents, a function that starts one more agent named by its argument, and
    the metrics file."""
    port = h.ddprund()
    flags = c10d(port, nnodes, nproc, run_id=tag) + ["--restart-scope=failed", "--max-restarts",
                                                     "3", "--shutdown-timeout", "5"] + list(extra_flags)
    metrics = os.path.join(TMP, tag + ".metrics.jsonl")
    cmd = [TRAIN, "--config", config(epochs), "--metrics", metrics]
    env = dict(os.environ, DDP_NO_SLURM="1")

    def agent(name, extra=(), agent_env=env):
        return h.spawn(name, [os.path.join(BIN, "ddprun")] + list(extra) + flags + cmd, agent_env)
    a0 = agent(tag + "0", ["--node-rank", "0"], dict(env, **(node0_env or {})))
    a1 = agent(tag + "1")
    poll("progress", lambda: last_step(metrics) > 20, 120)
    return a0, a1, agent, metrics


def node_loss(h, spare):
    """2 nodes x 2 workers (nnodes 1:2, or 1:2 plus a spare agent waiting): node 1's agent is
    SIGKILLed (its workers die with it); node 0's workers keep their processes and train on with
    world size 2 (or 4 again with the spare); then (without a spare) a new agent joins and the world
    grows back to 4 in place. Node 0 never restarts a worker; the job finishes."""
    a0, a1, agent, metrics = two_nodes(h, "nl")
    if spare:
        agent("nl2")
        poll("the spare waiting", lambda: "waiting as a spare" in h.output("nl2"), 60)
    kept = sorted(workers(a0.pid))
    check(len(kept) == 2, "node 0 runs %s" % kept)
    since = last_step(metrics)
    os.kill(a1.pid, signal.SIGKILL)
    h.log("killed node 1's agent at step %d" % since)
    poll("the round formed in place", lambda: "formed in place" in h.output("nl0"), 60)
    poll("progress after the loss", lambda: last_step(metrics) > since + 10, 120)
    check(sorted(workers(a0.pid)) == kept, "node 0's workers were restarted")
    if not spare:
        since = last_step(metrics)
        agent("nl2")
        poll("the world grown back", lambda: h.output("nl0").count("formed in place") >= 2, 60)
        poll("progress after the growth", lambda: last_step(metrics) > since + 10, 120)
        check(sorted(workers(a0.pid)) == kept, "node 0's workers were restarted")
        # The generations that ended in place (the loss, the growth) are in the job's history,
        # said to be so.
        def in_place():
            return [e["generation"] for e in job_status(h, "nl").get("history", [])
                    if "went on in place" in (e.get("detail") or "")]
        poll("generations 0 and 1 in the history as gone on in place",
             lambda: in_place()[:2] == [0, 1], 30)
    check(finish(h, a0, "nl0", metrics) == 0, "node 0 failed:\n" + h.output("nl0")[-3000:])
    out = h.output("nl0")
    check("restarting the job" not in out and "stopping the other workers" not in out,
          "node 0 restarted its workers:\n" + out[-3000:])
    worlds = [line["world_size"] for line in json_lines(metrics)]
    check(worlds[-1] == 4, "world sizes over the run: %s" % sorted(set(worlds)))
    if spare:  # the spare took the lost node's place at once
        check("generation 1: node rank 1 of 2" in h.output("nl2"), "the spare did not take the place:\n"
              + h.output("nl2")[-2000:])
    else:
        check(2 in worlds, "the world never shrank: %s" % sorted(set(worlds)))


def kill_after_form(h):
    """Capability outlives a generation formed in place (issue 31, item 1): a worker SIGKILLed
    within a poll of `generation N formed in place` is replaced in place, on a survivor's node and
    on a newcomer's; nothing restarts."""
    a0, a1, agent, metrics = two_nodes(h, "kf")
    kept = sorted(workers(a0.pid))
    check(len(kept) == 2, "node 0 runs %s" % kept)
    os.kill(a1.pid, signal.SIGKILL)
    h.log("killed node 1's agent at step %d" % last_step(metrics))
    poll("the round formed in place", lambda: "formed in place" in h.output("kf0"), 60, 0.01)
    victim = kept[1]
    os.kill(victim, signal.SIGKILL)
    h.log("killed node 0's worker %d right after the round formed" % victim)
    poll("the replacement", lambda: "replacing in place" in h.output("kf0"), 60)
    since = last_step(metrics)
    poll("progress after the replacement", lambda: last_step(metrics) > since + 5, 120)
    check(kept[0] in workers(a0.pid), "node 0's healthy worker lost its process")
    a2 = agent("kf2")
    poll("the world grown back", lambda: h.output("kf0").count("formed in place") >= 2, 60, 0.01)
    poll("the newcomer's workers", lambda: len(workers(a2.pid)) == 2, 60, 0.01)
    newcomer = sorted(workers(a2.pid))[0]
    os.kill(newcomer, signal.SIGKILL)
    h.log("killed the newcomer's worker %d right after the round formed" % newcomer)
    poll("the newcomer's replacement", lambda: "replacing in place" in h.output("kf2"), 60)
    since = last_step(metrics)
    poll("progress after the growth", lambda: last_step(metrics) > since + 5, 120)
    check(kept[0] in workers(a0.pid), "node 0's healthy worker lost its process")
    check(finish(h, a0, "kf0", metrics) == 0, "node 0 failed:\n" + h.output("kf0")[-3000:])
    for name in ("kf0", "kf2"):
        out = h.output(name)
        check("no worker is replaced in place" not in out and "restarting the job" not in out,
              "%s fell back to a full restart:\n%s" % (name, out[-3000:]))
    check(json_lines(metrics)[-1]["world_size"] == 4, "the job did not end on 4 workers")


def round_ended(h):
    """A round joined in place ends before it is ready (issue 31: the storm's "generation N+1 ended
    before its worker store was published" restarted every worker): 2 nodes x 1 worker, nnodes 1:4;
    a third agent joins, so nodes 0 and 1 move on in place into the next round, where node 0 holds
    its worker store back (DDP_TEST_HOLD_WORKER_STORE, while the test's file exists); a fourth
    agent joins meanwhile and ends that round before it was ready. Node 1 joins the next round in place; no worker restarts,
    nodes 0 and 1 keep their processes, the job finishes on 4 workers."""
    hold = os.path.join(TMP, "re.hold")  # node 0 holds while it exists
    a0, a1, agent, metrics = two_nodes(h, "re", epochs=8, nnodes="1:4", nproc=1,
                                       node0_env={"DDP_TEST_HOLD_WORKER_STORE": hold})
    kept = sorted(workers(a0.pid) + workers(a1.pid))
    check(len(kept) == 2, "nodes 0 and 1 run %s" % kept)
    open(hold, "w").close()
    agent("re2")
    poll("node 0 holding generation 1's worker store",
         lambda: "DDP_TEST_HOLD_WORKER_STORE" in h.output("re0"), 60, 0.01)
    agent("re3")
    said = ("ended before it was ready", "cannot go on in place")
    poll("node 1 learning that generation 1 ended",
         lambda: any(w in h.output("re1") for w in said), 60, 0.01)
    os.unlink(hold)
    h.log("released node 0's worker store")
    out1 = h.output("re1")
    check("ended before it was ready" in out1 and "cannot go on in place" not in out1,
          "node 1 did not go on in place past the round that ended:\n" + out1[-3000:])
    poll("the world of 4", lambda: (json_lines(metrics) or [{}])[-1].get("world_size") == 4, 120)
    since = last_step(metrics)
    poll("progress on 4 workers", lambda: last_step(metrics) > since + 5, 120)
    check(sorted(workers(a0.pid) + workers(a1.pid)) == kept, "node 0's or 1's worker was restarted")
    check(finish(h, a0, "re0", metrics) == 0, "node 0 failed:\n" + h.output("re0")[-3000:])
    for name in ("re0", "re1"):
        out = h.output(name)
        check("cannot go on in place" not in out and "restarting the job" not in out,
              "%s fell back to a full restart:\n%s" % (name, out[-3000:]))


def excluded_in_place(h):
    """2 nodes x 2 workers (nnodes 1:2, --exclude-after 2, a 1 s cooldown): a worker of node 1 is
    SIGKILLed twice. The first is replaced in place; the second makes node 1 leave the job for its
    cooldown: node 0's workers keep their processes and train on with world size 2, no worker is
    replaced for that failure. After the cooldown node 1 joins again and the world grows back to
    4 in place; the job finishes."""
    # A job 2.5 times longer than the others' (its tail must outlast the 1 s cooldown by far).
    a0, a1, _, metrics = two_nodes(h, "ex", ["--exclude-after", "2", "--exclude-cooldown", "1"],
                                   epochs=150)
    kept = sorted(workers(a0.pid))
    for kill in (1, 2):
        victim = sorted(workers(a1.pid, log=h.output("ex1")))[0]
        since = last_step(metrics)
        os.kill(victim, signal.SIGKILL)
        h.log("killed node 1's worker %d (kill %d) at step %d" % (victim, kill, since))
        if kill == 1:
            poll("the replacement", lambda: "replacing in place" in h.output("ex1"), 60)
            poll("progress after the replacement", lambda: last_step(metrics) > since + 5, 120)
    poll("node 1 leaving", lambda: "leaving this node out of the job" in h.output("ex1"), 60)
    poll("the round formed in place without node 1",
         lambda: "formed in place" in h.output("ex0"), 60)
    since = last_step(metrics)
    poll("progress without node 1", lambda: last_step(metrics) > since + 5, 120)
    check(2 in [line["world_size"] for line in json_lines(metrics)], "the world never shrank")
    poll("node 1 back after its cooldown", lambda: "is back in the job" in h.output("ex1"), 60)
    poll("the world grown back", lambda: h.output("ex0").count("formed in place") >= 2, 60)
    check(sorted(workers(a0.pid)) == kept, "node 0's workers were restarted")
    check(h.output("ex1").count("replacing in place") == 1,
          "node 1 replaced the worker of the failure it left for:\n" + h.output("ex1")[-3000:])
    check(finish(h, a0, "ex0", metrics) == 0, "node 0 failed:\n" + h.output("ex0")[-3000:])
    check(a1.wait(timeout=60) == 0, "node 1 failed:\n" + h.output("ex1")[-3000:])
    check(json_lines(metrics)[-1]["world_size"] == 4, "the job did not end on 4 workers")
    out = h.output("ex0")
    check("restarting the job" not in out, "node 0 restarted its workers:\n" + out[-3000:])


def node_stop(h):
    """2 nodes x 2 workers: node 1's agent SIGSTOPped past the heartbeat timeout (its workers run
    on, in a world the survivors left). Node 0 goes on in place with world size 2; when node 1 is
    continued it finds itself dropped, stops its stale workers and rejoins; the world grows back to
    4 in place. Node 0 never restarts a worker; both agents exit 0."""
    from multinode_harness import HEARTBEAT_TIMEOUT
    a0, a1, _, metrics = two_nodes(h, "ns")
    kept = sorted(workers(a0.pid))
    os.kill(a1.pid, signal.SIGSTOP)
    h.log("stopped node 1's agent")
    try:
        poll("the round formed in place", lambda: "formed in place" in h.output("ns0"),
             10 * HEARTBEAT_TIMEOUT)
        since = last_step(metrics)
        poll("progress without node 1", lambda: last_step(metrics) > since + 10, 120)
    finally:
        os.kill(a1.pid, signal.SIGCONT)
    h.log("continued node 1's agent")
    poll("the world grown back", lambda: h.output("ns0").count("formed in place") >= 2, 120)
    check(sorted(workers(a0.pid)) == kept, "node 0's workers were restarted")
    check(finish(h, a0, "ns0", metrics) == 0, "node 0 failed:\n" + h.output("ns0")[-3000:])
    check(finish(h, a1, "ns1", metrics) == 0, "node 1 failed:\n" + h.output("ns1")[-3000:])
    out = h.output("ns0")
    check("restarting the job" not in out and "stopping the other workers" not in out,
          "node 0 restarted its workers:\n" + out[-3000:])


def node_cut(h):
    """2 hosts x 2 workers, each host (and ddprund) in a network namespace of its own; node 1's link
    goes down. Node 0's workers keep their processes and train on with world size 2; node 1's agent
    loses the store, stops its workers and exits; the link comes back and a new agent there grows
    the world back to 4 in place. Nothing on node 0 restarts; the job finishes."""
    if os.geteuid() != 0:
        print("SKIP: needs root for network namespaces")
        sys.exit(77)
    # Long enough to outlast node 1's agent giving up on the store and a new agent joining.
    cfg = config(400)
    ips = h.make_netns(["d", "a", "b"])
    port = h.ddprund(netns=ips["d"][0], host=ips["d"][1])
    # A cut-off agent notices when a store call gives up: read_timeout, not heartbeat_timeout.
    conf = RDZV_CONF.replace("read_timeout=10", "read_timeout=3")
    metrics = os.path.join(TMP, "nc.metrics.jsonl")
    cmd = [TRAIN, "--config", cfg, "--metrics", metrics]
    env = dict(os.environ, DDP_NO_SLURM="1")

    def agent(name, host, extra=()):
        flags = c10d(port, "1:2", 2, run_id="nc", host=ips["d"][1], conf=conf,
                     extra=["--local-addr", ips[host][1]] + list(extra))
        return h.spawn(name, h.in_ns(ips[host][0], [os.path.join(BIN, "ddprun")] + flags + [
            "--restart-scope=failed", "--max-restarts", "3", "--shutdown-timeout", "5"] + cmd), env)
    a0 = agent("nc0", "a", ["--node-rank", "0"])
    a1 = agent("nc1", "b")
    poll("progress", lambda: last_step(metrics) > 20, 120)
    kept = sorted(workers(a0.pid))
    check(len(kept) == 2, "node 0 runs %s" % kept)
    stale = workers(a1.pid)
    since = last_step(metrics)
    subprocess.run(["ip", "-n", ips["b"][0], "link", "set", "eth0", "down"], check=True)
    h.log("link of node 1 down at step %d" % since)
    poll("the round formed in place", lambda: "formed in place" in h.output("nc0"), 60)
    poll("progress without node 1", lambda: last_step(metrics) > since + 10, 120)
    check(sorted(workers(a0.pid)) == kept, "node 0's workers were restarted:\n" +
          h.output("nc0")[-3000:])
    rc = h.wait_exit(a1, "nc1", 120)
    check(rc != 0, "the cut-off agent exited 0")
    check(not any(alive(p) for p in stale), "node 1's workers still run after its agent exited")
    subprocess.run(["ip", "-n", ips["b"][0], "link", "set", "eth0", "up"], check=True)
    since = last_step(metrics)
    agent("nc2", "b")
    poll("the world grown back", lambda: h.output("nc0").count("formed in place") >= 2, 120)
    poll("progress after the growth", lambda: last_step(metrics) > since + 10, 120)
    check(sorted(workers(a0.pid)) == kept, "node 0's workers were restarted")
    check(finish(h, a0, "nc0", metrics) == 0, "node 0 failed:\n" + h.output("nc0")[-3000:])
    out = h.output("nc0")
    check("restarting the job" not in out and "stopping the other workers" not in out,
          "node 0 restarted its workers:\n" + out[-3000:])
    worlds = [line["world_size"] for line in json_lines(metrics)]
    check(2 in worlds and worlds[-1] == 4, "world sizes over the run: %s" % sorted(set(worlds)))


def main():
    return run({
        "node_loss": lambda h: node_loss(h, spare=False),
        "node_loss_spare": lambda h: node_loss(h, spare=True),
        "node_stop": node_stop,
        "node_cut": node_cut,
        "excluded_in_place": excluded_in_place,
        "kill_after_form": kill_after_form,
        "round_ended": round_ended,
    })


if __name__ == "__main__":
    sys.exit(main())
