"""The root cause is the culprit (issue 10, item 3), end to end with the real `train`:

  root_cause_test.py fail_at_step   `ddprun --nproc-per-node=2 train ... --fail-at-step N
                                    --fail-rank 1`, 20 times: rank 1 is the root cause every time,
                                    rank 0's "Connection closed by peer" is collateral, ddprun exits 1
  root_cause_test.py cross_node     2 agents (node ranks 0 and 1, one worker each) against a
                                    ddprund: the culprit (rank 1) is on node 1, which reports
                                    second (its worker's wrapper holds its exit until node 0 has
                                    reported and spent the budget); both agents print the same
                                    summary naming rank 1, and both exit 1
  root_cause_test.py one_node_comm  one node, 2 workers, rank 1 hangs (--hang-at-step) and rank 0
                                    fails on its collective's budget (comm_timeout_s 2): only
                                    communication failures, but the round has no other node whose
                                    loss could explain them, so ddprun reports at once instead of
                                    waiting for a lost peer; it exits with rank 0's code 3

The verdict (issue 22 item 2; docs/running.md "A verdict instead of a loop"), opt-in since issue
30 (--verdict-after=3 given), --max-restarts=3:
  root_cause_test.py verdict_same   one node, rank 1 fails at step 3 in every generation
                                    (--fail-generations): the job stops after 3 generations (the
                                    budget not spent) with exit 87, the line naming the repeated
                                    cause, and the summary's root cause headed by it; without
                                    --verdict-after (the default, off) the same job spends its
                                    budget and exits 1
  root_cause_test.py verdict_progress  rank 1 fails in every generation, 2 steps further each time:
                                    no verdict, the budget is spent (4 generations, exit 1); the
                                    error file holds the step the worker reported last (9)
  root_cause_test.py verdict_no_progress  the failing rank alternates (0, 1, 0, 1) at step 3: never
                                    the same failure twice in a row, but no step progress: exit 87
                                    after 4 generations ("no step progress"; --max-restarts=4, so
                                    that a restart is left when it fires)
  root_cause_test.py verdict_cross_node  2 agents against a ddprund (--max-restarts=5), rank 1 on
                                    node 1 fails in every generation: both agents exit 87 after 3
                                    generations with the same verdict line and summary

Every process started here is stopped by pid (multinode_harness.Harness).
"""
import json
import os
import re
import stat
import sys

sys.dont_write_bytecode = True  # nothing written into the source tree
sys.path.insert(0, os.path.join(os.environ["DDP_SOURCE_DIR"], "tests", "integration"))
from multinode_harness import (BIN, RDZV_CONF, TMP, check, failure_summary,  # noqa: E402
                               poll, root_cause, run_scenario, train_config)

TRAIN = os.path.join(BIN, "train")
DDPRUN = os.path.join(BIN, "ddprun")


def check_culprit(summary, where):
    root = root_cause(summary)
    check(re.search(r"rank\s*: 1 \(local_rank: \d\)", root),
          "%s: the root cause is not rank 1:\n%s" % (where, summary))
    check(re.search(r"exitcode\s*: 1 \(pid", root), "%s: root cause exit code:\n%s" %
          (where, summary))
    check("injected failure: rank 1" in root, "%s: root cause message:\n%s" % (where, summary))
    check("numbered by the worker when it failed" in root,
          "%s: the culprit did not number its own failure:\n%s" % (where, summary))
    others = summary[:summary.index("Root Cause")]
    check("stopped by ddprun" not in root, "%s: the culprit is called stopped:\n%s" %
          (where, summary))
    check(re.search(r"rank\s*: 0 \(local_rank: 0\)", others),
          "%s: rank 0 is not listed among the other failures:\n%s" % (where, summary))


def scenario_fail_at_step(h):
    config = train_config(2048, 8, 2, epochs=3)
    for attempt in range(20):
        p = h.spawn("run%d" % attempt, [DDPRUN, "--nproc-per-node=2", "--shutdown-timeout=10",
                                         TRAIN, "--config", config, "--fail-at-step", "5",
                                         "--fail-rank", "1"],
                    dict(os.environ, DDP_NO_SLURM="1", PATH=BIN + ":" + os.environ["PATH"]))
        rc = h.wait_exit(p, "run%d" % attempt, 60)
        out = h.output("run%d" % attempt)
        check(rc == 1, "run %d: ddprun exited %d, want 1 (rank 1's code):\n%s" %
              (attempt, rc, out[-3000:]))
        check_culprit(failure_summary(out), "run %d" % attempt)
    h.log("20 of 20 runs: rank 1 is the root cause")


def scenario_one_node_comm(h):
    config = train_config(2048, 8, 2, epochs=3, comm_timeout_s=2)
    p = h.spawn("run", [DDPRUN, "--nproc-per-node=2", "--max-restarts=0", TRAIN, "--config",
                        config, "--hang-at-step", "5", "--hang-rank", "1"],
                dict(os.environ, DDP_NO_SLURM="1", PATH=BIN + ":" + os.environ["PATH"]))
    rc = h.wait_exit(p, "run", 120)
    out = h.output("run")
    check(rc == 3, "ddprun exited %d, want 3 (rank 0's CommError):\n%s" % (rc, out[-3000:]))
    check("for a lost peer" not in out,
          "a one-node job waited for a lost peer:\n%s" % out[-3000:])
    root = root_cause(failure_summary(out))
    check(re.search(r"rank\s*: 0 \(local_rank: 0\)", root) and "did not arrive" in root,
          "the root cause is not rank 0's timed-out collective:\n%s" % root)
    h.log("one node, communication failures only: reported at once, exit 3")


WRAPPER = """#!/bin/bash
# The culprit's process stays alive after train fails until the test releases it, so its node
# reports second; SIGTERM from its agent is noted and ignored meanwhile.
trap 'echo "wrapper: SIGTERM while holding the exit" >&2' TERM
"$TRAIN" "$@"
rc=$?
if [ "$RANK" = 1 ]; then
  while [ ! -e "$RELEASE" ]; do sleep 0.02; done
fi
exit $rc
"""


def scenario_cross_node(h):
    config = train_config(2048, 8, 2, epochs=3)
    wrapper = os.path.join(TMP, "wrapper.sh")
    with open(wrapper, "w") as f:
        f.write(WRAPPER)
    os.chmod(wrapper, os.stat(wrapper).st_mode | stat.S_IXUSR)
    release = os.path.join(TMP, "release")
    port = h.ddprund()
    env = dict(os.environ, DDP_NO_SLURM="1", TRAIN=TRAIN, RELEASE=release)
    agents = {}
    for node in (0, 1):
        name = "node%d" % node
        agents[name] = h.spawn(name, [
            DDPRUN, "--nnodes=2", "--nproc-per-node=1", "--node-rank=%d" % node,
            "--rdzv-backend=c10d", "--rdzv-endpoint=127.0.0.1:%d" % port, "--rdzv-id=xnode",
            "--rdzv-conf", RDZV_CONF, "--shutdown-timeout=30", wrapper, "--config", config,
            "--fail-at-step", "5", "--fail-rank", "1"], env)
    poll("node 0 reporting its victim's failure and spending the budget",
         lambda: "workers failed on node rank 0" in h.output("node0") and
         "is spent" in h.output("node0"), 60)
    h.log("node 0 reported first; releasing the culprit's wrapper on node 1")
    open(release, "w").close()
    summaries = {}
    for name, p in agents.items():
        rc = h.wait_exit(p, name, 60)
        out = h.output(name)
        check(rc == 1, "%s exited %d, want 1 (rank 1's code):\n%s" % (name, rc, out[-3000:]))
        summaries[name] = failure_summary(out)
        check_culprit(summaries[name], name)
        check("note      : collateral" in summaries[name],
              "%s: rank 0 is not marked collateral:\n%s" % (name, summaries[name]))
    check(summaries["node0"] == summaries["node1"],
          "the two agents print different summaries:\n%s\n---\n%s" %
          (summaries["node0"], summaries["node1"]))
    h.log("both agents: the same summary, rank 1 on node 1 (which reported second)")


VERDICT_EXIT = 87
INJECTED = ("rank 1 exit 1 'ddp::Error: injected failure: rank 1 stops at step 3 (--fail-at-step, "
            "generation 0 to 9)' at step 3")
SAME = "the same failure in 3 generations in a row: " + INJECTED + "; stopping instead of restarting"
NO_PROGRESS = ("no step progress in 3 generations in a row (the furthest step stays 3; last: " +
               INJECTED + "); stopping instead of restarting")

# train failing in every generation, at step FAIL_STEP + FAIL_STEP_GROWTH x generation, on rank 1
# or (FAIL_RANK_ALTERNATES=1) on rank generation % 2.
VARYING = """#!/bin/bash
g=$TORCHELASTIC_RESTART_COUNT
rank=1
[ "$FAIL_RANK_ALTERNATES" = 1 ] && rank=$((g % 2))
exec "$TRAIN" "$@" --fail-at-step $((FAIL_STEP + FAIL_STEP_GROWTH * g)) --fail-rank $rank \\
  --fail-generations 10
"""


def generations(out):
    """The generations whose workers started (rank 0 of `train` logs each)."""
    return sorted({int(g) for g in re.findall(r"training .* \(generation (\d+)", out)})


def run_one_node(h, name, config, entry, args, env=None, max_restarts=3):
    """ddprun --max-restarts=3 with 2 workers on one node; returns its exit code and output."""
    p = h.spawn(name, [DDPRUN, "--nproc-per-node=2", "--max-restarts=%d" % max_restarts,
                       "--shutdown-timeout=10"] + args[0] + [entry, "--config", config] + args[1],
                dict(os.environ, DDP_NO_SLURM="1", PATH=BIN + ":" + os.environ["PATH"],
                     TRAIN=TRAIN, **(env or {})))
    return h.wait_exit(p, name, 150), h.output(name)


def check_verdict(out, line, where):
    """The verdict's line in the log, heading the summary's root cause, with exit code 87."""
    summary = failure_summary(out)
    root = root_cause(summary)
    check(("the job stopped with a verdict (exit 87): " + line) in out,
          "%s: no line naming the verdict (%r):\n%s" % (where, line, out[-4000:]))
    check(root.startswith("Root Cause (" + line + "):"),
          "%s: the root cause is not headed by the verdict:\n%s" % (where, summary))
    check(re.search(r"verdict\s*: exitcode 87 \(the job stopped with a verdict", root),
          "%s: no verdict exit code in the root cause:\n%s" % (where, summary))
    check("is spent" not in out, "%s: the restart budget was spent:\n%s" % (where, out[-4000:]))
    return summary


FAIL_EVERY_GENERATION = ["--fail-at-step", "3", "--fail-rank", "1", "--fail-generations", "10"]
VERDICT_ON = ["--verdict-after=3"]  # opt-in (issue 30 item 3)


def scenario_verdict_same(h):
    config = train_config(2048, 8, 2, epochs=3)
    rc, out = run_one_node(h, "same", config, TRAIN, (VERDICT_ON, FAIL_EVERY_GENERATION))
    check(rc == VERDICT_EXIT, "ddprun exited %d, want 87:\n%s" % (rc, out[-4000:]))
    check(generations(out) == [0, 1, 2], "generations %s, want [0, 1, 2]" % generations(out))
    check_culprit(check_verdict(out, SAME, "verdict"), "verdict")
    h.log("the same failure 3 times: exit 87 after generation 2, budget left")
    # Without the verdict (the default) the same job spends its budget: the verdict stopped it.
    rc, out = run_one_node(h, "off", config, TRAIN, ([], FAIL_EVERY_GENERATION))
    check(rc == 1, "no --verdict-after: ddprun exited %d, want 1:\n%s" % (rc, out[-4000:]))
    check(generations(out) == [0, 1, 2, 3], "no --verdict-after: generations %s" % generations(out))
    check("generations in a row" not in out, "no --verdict-after, but a verdict:\n%s" % out[-4000:])
    h.log("no --verdict-after: the budget is spent (4 generations, exit 1)")


def varying_wrapper():
    wrapper = os.path.join(TMP, "varying.sh")
    with open(wrapper, "w") as f:
        f.write(VARYING)
    os.chmod(wrapper, os.stat(wrapper).st_mode | stat.S_IXUSR)
    return wrapper


def scenario_verdict_progress(h):
    config = train_config(2048, 8, 2, epochs=3)
    rc, out = run_one_node(h, "progress", config, varying_wrapper(), (VERDICT_ON, []),
                           {"FAIL_STEP": "3", "FAIL_STEP_GROWTH": "2", "FAIL_RANK_ALTERNATES": "0"})
    check(rc == 1, "ddprun exited %d, want 1 (no verdict; the budget spent):\n%s" %
          (rc, out[-4000:]))
    check(generations(out) == [0, 1, 2, 3], "generations %s, want 0..3" % generations(out))
    check("with a verdict" not in out, "a verdict fired although every generation got further:\n%s" %
          out[-4000:])
    root = root_cause(failure_summary(out))
    check("stops at step 9" in root, "the last failure is not at step 9:\n%s" % root)
    # What the progress rule read: the step the worker reported last, in its error file.
    m = re.search(r"error_file: (\S+)", root)
    check(m, "no error file in the root cause:\n%s" % root)
    with open(m.group(1)) as f:
        step = json.load(f)["message"]["extraInfo"].get("step")
    check(step == "9", "the error file's extraInfo.step is %r, want '9'" % step)
    h.log("2 steps further each time: no verdict, the budget spent (exit 1)")


def scenario_verdict_no_progress(h):
    config = train_config(2048, 8, 2, epochs=3)
    rc, out = run_one_node(h, "noprogress", config, varying_wrapper(), (VERDICT_ON, []),
                           {"FAIL_STEP": "3", "FAIL_STEP_GROWTH": "0", "FAIL_RANK_ALTERNATES": "1"},
                           max_restarts=4)
    check(rc == VERDICT_EXIT, "ddprun exited %d, want 87:\n%s" % (rc, out[-4000:]))
    check(generations(out) == [0, 1, 2, 3], "generations %s, want 0..3" % generations(out))
    check_verdict(out, NO_PROGRESS, "no progress")
    h.log("alternating ranks, no step progress: exit 87 after generation 3")


def scenario_verdict_cross_node(h):
    config = train_config(2048, 8, 2, epochs=3)
    port = h.ddprund()
    env = dict(os.environ, DDP_NO_SLURM="1")
    agents = {}
    for node in (0, 1):
        name = "node%d" % node
        agents[name] = h.spawn(name, [
            DDPRUN, "--nnodes=2", "--nproc-per-node=1", "--node-rank=%d" % node,
            "--rdzv-backend=c10d", "--rdzv-endpoint=127.0.0.1:%d" % port, "--rdzv-id=verdict",
            "--rdzv-conf", RDZV_CONF, "--max-restarts=5", "--shutdown-timeout=10"] +
            VERDICT_ON + [TRAIN, "--config", config] + FAIL_EVERY_GENERATION, env)
    summaries = {}
    for name, p in agents.items():
        rc = h.wait_exit(p, name, 150)
        out = h.output(name)
        check(rc == VERDICT_EXIT, "%s exited %d, want 87:\n%s" % (name, rc, out[-4000:]))
        summaries[name] = check_verdict(out, SAME, name)
    check(summaries["node0"] == summaries["node1"],
          "the two agents print different summaries:\n%s\n---\n%s" %
          (summaries["node0"], summaries["node1"]))
    check(generations(h.output("node0")) == [0, 1, 2],
          "generations %s, want [0, 1, 2]" % generations(h.output("node0")))
    h.log("2 agents: the same verdict, exit 87 on both")


SCENARIOS = {"fail_at_step": scenario_fail_at_step, "cross_node": scenario_cross_node,
             "one_node_comm": scenario_one_node_comm, "verdict_same": scenario_verdict_same,
             "verdict_progress": scenario_verdict_progress,
             "verdict_no_progress": scenario_verdict_no_progress,
             "verdict_cross_node": scenario_verdict_cross_node}


if __name__ == "__main__":
    sys.exit(run_scenario(sys.argv, SCENARIOS))
