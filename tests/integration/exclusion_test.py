"""Bad-node exclusion on loopback (issue 22, item 1): `exclusion_test.py SCENARIO`.

One ddprund and several ddprun agents (multinode_harness.py); the agent playing the bad node
runs workers that fail while a file exists (multinode_worker.py's MN_FAIL_WHILE). Scenarios:
  excluded  a 2:3 job of three nodes: the bad node's workers fail twice (--exclude-after 2), it
            leaves for its cooldown and the other two go on as a 2-node job; the store keeps the
            exclusion; once the file is gone and the cooldown over it joins again (a 3-node
            generation) and the job succeeds, the exclusion marked returned
  refused   a fixed 2-node job without a spare: the bad node stays (one line says why) and the
            job fails once the restart budget is spent; nothing is excluded
  spare     a fixed 2-node job: the bad node's workers are killed once, then again with a spare
            waiting: the bad node leaves and the spare takes its place
  preflight a 2:3 job under --preflight=strict where one node fails a check (no GPU while the
            others see one): it leaves for its cooldown instead of failing the job, the other two
            run, ddprund's page (headless Chromium) lists it as out, and it ends its wait when the
            job succeeds
  preflight_two  the same with two nodes blamed in a 2:3 job: only one could leave, so none
            does and the round fails everywhere (exit 4), nobody left waiting
Exits 0 (pass) or 1 (fail, with the agents' logs).
"""
import json
import os
import re
import sys

sys.dont_write_bytecode = True  # nothing written into the source tree
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from multinode_harness import TMP, c10d, check, poll, store_values  # noqa: E402
from multinode_test import main  # noqa: E402
from recovery_test import ddprund_page, job_status  # noqa: E402
from status_page_test import dump_dom  # noqa: E402

LEFT = "leaving this node out of the job"


def flags(port, nnodes, run_id, cooldown="600", after="2"):
    return c10d(port, nnodes, 1, run_id=run_id,
                extra=["--max-restarts", "6", "--verdict-after", "0", "--exclude-after", after,
                       "--exclude-window", "600", "--exclude-cooldown", cooldown])


def exclusions(port, run_id):
    values = store_values(port, r"^rdzv/%s/\d+/excluded$" % run_id)
    return [json.loads(line) for v in values.values() for line in v.splitlines() if line]


def generation_after(h, after, world):
    """The first generation after `after` in which all `world` ranks recorded, or None."""
    counts = {}
    for r in h.records():
        g = int(r["TORCHELASTIC_RESTART_COUNT"])
        if g > after and int(r["WORLD_SIZE"]) == world:
            counts[g] = counts.get(g, 0) + 1
    full = [g for g, n in counts.items() if n == world]
    return min(full) if full else None


def scenario_excluded(h):
    port = h.ddprund()
    go, bad = os.path.join(TMP, "go"), os.path.join(TMP, "bad")
    open(bad, "w").close()
    f = flags(port, "2:3", "excl", cooldown="12")
    agents = {n: h.agent(n, f, {"MN_GO_FILE": go}) for n in ("a", "b")}
    agents["c"] = h.agent("c", f, {"MN_GO_FILE": go, "MN_FAIL_WHILE": bad})
    poll("c leaving the job", lambda: LEFT in h.output("c"), 60)
    two = poll("a 2-node generation without c", lambda: h.generation_with_world(2, "ab"), 40)
    gen = int(two[0]["TORCHELASTIC_RESTART_COUNT"])
    check(gen >= 2, "the 2-node generation is %d; c failed twice before" % gen)
    failed = {int(r["TORCHELASTIC_RESTART_COUNT"]) for r in h.records(node="c")}
    check(len(failed) == 2, "c ran workers in generations %s; want exactly 2 before it left"
          % sorted(failed))
    listed = exclusions(port, "excl")
    check(len(listed) == 1 and listed[0]["pid"] == agents["c"].pid and
          listed[0]["returned_at"] == -1 and "2 failure(s)" in listed[0]["why"],
          "the store's exclusions: %s" % listed)
    # ddprund's /status and /metrics show it out (for its cooldown of 12 s).
    job = job_status(h, "excl")
    check(job.get("nodes_excluded") == 1 and job.get("exclusion_count") == 1 and
          job["exclusions"][0]["pid"] == agents["c"].pid, "/status: %s" % job.get("exclusions"))
    check('ddprun_job_nodes_excluded{job="excl"} 1\n' in ddprund_page(h, "metrics"),
          "/metrics does not count c as excluded")
    os.unlink(bad)  # the node is fine again: it comes back after its cooldown
    back = poll("c back in a 3-node generation after it", lambda: generation_after(h, gen, 3), 40)
    poll("c's exclusion marked returned",
         lambda: [e for e in exclusions(port, "excl") if e["returned_at"] == back], 20)
    job = job_status(h, "excl")
    check(job.get("nodes_excluded") == 0 and job.get("exclusion_count") == 1,
          "/status once c is back: %s" % job.get("exclusions"))
    with open(go, "w") as out:
        out.write("3")
    for n, p in agents.items():
        rc = h.wait_exit(p, n, 30)
        check(rc == 0, "agent %s exited %d:\n%s" % (n, rc, h.output(n)[-3000:]))
    check("is back in the job after its cooldown" in h.output("c"), "c's log says it is back")


def scenario_refused(h):
    port = h.ddprund()
    bad = os.path.join(TMP, "bad")
    open(bad, "w").close()
    f = flags(port, "2", "refused")
    agents = {"a": h.agent("a", f, {"MN_GO_FILE": os.path.join(TMP, "go")}),
              "b": h.agent("b", f, {"MN_FAIL_WHILE": bad})}
    for n, p in agents.items():
        rc = h.wait_exit(p, n, 60)
        check(rc != 0, "agent %s exited 0; the budget should be spent" % n)
    out = h.output("b")
    check("would drop the job below min_nodes=2" in out and "it stays" in out,
          "b says why it stays:\n%s" % out[-3000:])
    check(LEFT not in out, "b left the job although the job has no node to spare")
    check(exclusions(port, "refused") == [], "an exclusion was kept")


def scenario_spare(h):
    port = h.ddprund()
    go = os.path.join(TMP, "go")
    f = flags(port, "2", "spare")
    agents = {n: h.agent(n, f, {"MN_GO_FILE": go}) for n in ("a", "b")}
    first = poll("a 2-node generation of a and b", lambda: h.generation_with_world(2, "ab"), 40)
    gen = int(first[0]["TORCHELASTIC_RESTART_COUNT"])
    # b's first failure comes before the spare exists, so b surely rejoins: at a restart the
    # nodes of the round and a spare waiting join the next round alike (whoever joins first, as in
    # torchrun), and a spare that came first would take b's place before b's second failure.
    os.kill(h.records(node="b", restart=gen)[0]["pid"], 9)
    again = poll("a 2-node generation of a and b after b's failure",
                 lambda: generation_after(h, gen, 2), 40)
    agents["c"] = h.agent("c", f, {"MN_GO_FILE": go})
    poll("c waiting as a spare", lambda: "waiting as a spare" in h.output("c"), 30)
    # b's second failure (--exclude-after 2) with a spare waiting: b leaves, c takes its place.
    os.kill(h.records(node="b", restart=again)[0]["pid"], 9)
    poll("b leaving the job", lambda: LEFT in h.output("b"), 60)
    poll("a 2-node generation of a and the spare c",
         lambda: h.generation_with_world(2, "ac"), 40)
    check(not h.records(node="c", restart=again), "c ran workers in b's generation %d" % again)
    with open(go, "w") as out:
        out.write("2")
    for n in ("a", "c"):
        rc = h.wait_exit(agents[n], n, 30)
        check(rc == 0, "agent %s exited %d:\n%s" % (n, rc, h.output(n)[-3000:]))
    rc = h.wait_exit(agents["b"], "b", 30)
    check(rc == 0, "b, out when the job succeeded, exited %d" % rc)


def scenario_preflight(h):
    port = h.ddprund()
    go = os.path.join(TMP, "go")
    f = flags(port, "2:3", "pfx") + ["--preflight", "strict"]
    # a and b report a GPU, c none: strict preflight blames c alone, whatever its node rank.
    agents = {n: h.agent(n, f, {"MN_GO_FILE": go, "DDP_TEST_FINGERPRINT": "gpus=1"})
              for n in ("a", "b")}
    agents["c"] = h.agent("c", f, {"MN_GO_FILE": go, "DDP_TEST_FINGERPRINT": "gpus=0"})
    poll("c leaving the job", lambda: LEFT in h.output("c"), 60)
    check("strict preflight blamed this node (node rank " in h.output("c") and "gpus: node" in h.output("c"),
          "c's log names the check:\n%s" % h.output("c")[-3000:])
    poll("a 2-node generation of a and b", lambda: h.generation_with_world(2, "ab"), 40)
    check(not h.records(node="c"), "c ran workers: %s" % h.records(node="c"))
    listed = exclusions(port, "pfx")
    check(len(listed) == 1 and listed[0]["pid"] == agents["c"].pid, "exclusions: %s" % listed)
    # ddprund's page, in headless Chromium, lists c as out (its cooldown is 600 s).
    base = re.search(r"status on (http://\S+/)", h.output("ddprund")).group(1)
    dom = dump_dom(base)
    item = re.search(r'<li class="excluded" data-host="[^"]*">(.*?)</li>', dom, re.S)
    check(item and "pid %d) left" % agents["c"].pid in item.group(1) and
          "strict preflight blamed this node" in item.group(1),
          "the page's excluded nodes: %s\n%s" % (item and item.group(0), dom[:3000]))
    check("excluded nodes (1)" in dom, "the list's heading counts 1")
    with open(go, "w") as out:
        out.write("2")
    for n, p in agents.items():  # c, out for its cooldown, ends its wait with the job
        rc = h.wait_exit(p, n, 30)
        check(rc == 0, "agent %s exited %d:\n%s" % (n, rc, h.output(n)[-3000:]))


def scenario_preflight_two(h):
    port = h.ddprund()
    f = flags(port, "2:3", "pf2") + ["--preflight", "strict"]
    # b and c see no GPU: both are blamed, only one may leave a 2:3 job, so none does.
    agents = {"a": h.agent("a", f, {"DDP_TEST_FINGERPRINT": "gpus=1"})}
    for n in ("b", "c"):
        agents[n] = h.agent(n, f, {"DDP_TEST_FINGERPRINT": "gpus=0"})
    for n, p in agents.items():
        rc = h.wait_exit(p, n, 60)
        check(rc == 4, "agent %s exited %d, want 4 (the round fails everywhere):\n%s" %
              (n, rc, h.output(n)[-3000:]))
        check(LEFT not in h.output(n), "agent %s left the job" % n)
    check(not h.records(), "workers ran: %s" % h.records())


SCENARIOS = {"preflight_two": scenario_preflight_two, "excluded": scenario_excluded, "refused": scenario_refused, "spare": scenario_spare,
             "preflight": scenario_preflight}

if __name__ == "__main__":
    sys.exit(main(sys.argv, SCENARIOS))
