"""torchrun's restart contract under ddprun's defaults (issue 30 item 3; docs/running.md "A verdict
instead of a loop"): with torchrun's flags ddprun restarts exactly --max-restarts times and exits
with the root cause's code; the verdict is opt-in (--verdict-after) and only takes away restarts
that are left. The worker is a shell script that fails the same way in every generation (exit 7,
the same error file message) until TORCHELASTIC_RESTART_COUNT reaches SUCCEED_AT, and notes each
generation it ran in.

  restart_budget_test.py torchrun_budget    --max-restarts=3, failing in generations 0-2 and
                                            succeeding in 3: exit 0 after 4 generations, no verdict
  restart_budget_test.py budget_exit_code   --max-restarts=2, always exit 7: exit 7 (not 87) after
                                            3 generations, the summary names the worker
  restart_budget_test.py verdict_opt_in     --verdict-after=2 --max-restarts=5, always exit 7: the
                                            verdict stops the job after 2 generations with exit 87
                                            and its line, budget left
  restart_budget_test.py verdict_at_budget  --verdict-after=3 --max-restarts=2, always exit 7: the
                                            verdict fires as the budget is spent: exit 7, and the
                                            summary's root cause shows the verdict as a line

Every process started here is stopped by pid (multinode_harness.Harness).
"""
import os
import re
import stat
import sys

sys.dont_write_bytecode = True  # nothing written into the source tree
sys.path.insert(0, os.path.join(os.environ["DDP_SOURCE_DIR"], "tests", "integration"))
from multinode_harness import BIN, TMP, check, failure_summary, root_cause, run_scenario  # noqa: E402

DDPRUN = os.path.join(BIN, "ddprun")
MESSAGE = "ValueError: bad learning rate"
WORKER = """#!/bin/bash
g=$TORCHELASTIC_RESTART_COUNT
echo "$g" >> "$GEN_FILE"
if [ "$g" -ge "$SUCCEED_AT" ]; then echo "generation $g: done"; exit 0; fi
printf '{"message": "%s", "timestamp": 0}' "$MESSAGE" > "$TORCHELASTIC_ERROR_FILE"
echo "generation $g: $MESSAGE" >&2
exit 7
"""
SAME = "the same failure in %d generations in a row: rank 0 exit 7 '" + MESSAGE + "'"


def run(h, name, flags, succeed_at=1000):
    """ddprun with one worker on one node; returns its exit code, output and generations run."""
    worker = os.path.join(TMP, "worker.sh")
    with open(worker, "w") as f:
        f.write(WORKER)
    os.chmod(worker, os.stat(worker).st_mode | stat.S_IXUSR)
    gen_file = os.path.join(TMP, name + ".generations")
    env = dict(os.environ, DDP_NO_SLURM="1", GEN_FILE=gen_file, SUCCEED_AT=str(succeed_at),
               MESSAGE=MESSAGE)
    for var in ("DDP_VERDICT_AFTER", "DDP_EXCLUDE_AFTER", "PET_MAX_RESTARTS"):
        env.pop(var, None)  # the defaults are under test
    p = h.spawn(name, [DDPRUN, "--standalone", "--nproc-per-node=1", "--shutdown-timeout=5"] +
                flags + [worker], env)
    rc = h.wait_exit(p, name, 120)
    with open(gen_file) as f:
        generations = [int(line) for line in f.read().split()]
    return rc, h.output(name), generations


def check_no_verdict(out, where):
    """No verdict in the log or the summary (paths may contain the word: the lines are checked)."""
    check("generations in a row" not in out and "exitcode 87" not in out,
          "%s: a verdict:\n%s" % (where, out[-4000:]))


def check_worker_root_cause(out, where):
    root = root_cause(failure_summary(out))
    check(re.search(r"rank\s*: 0 \(local_rank: 0\)", root) and
          re.search(r"exitcode\s*: 7 \(pid", root) and MESSAGE in root,
          "%s: the root cause is not the worker's exit 7:\n%s" % (where, root))
    return root


def scenario_torchrun_budget(h):
    rc, out, gens = run(h, "budget3", ["--max-restarts=3"], succeed_at=3)
    check(rc == 0, "ddprun exited %d, want 0 (generation 3 succeeds):\n%s" % (rc, out[-4000:]))
    check(gens == [0, 1, 2, 3], "generations %s, want [0, 1, 2, 3]" % gens)
    check_no_verdict(out, "no --verdict-after")
    h.log("--max-restarts=3, the same failure 3 times: generation 3 ran and succeeded (exit 0)")


def scenario_budget_exit_code(h):
    rc, out, gens = run(h, "always7", ["--max-restarts=2"])
    check(rc == 7, "ddprun exited %d, want 7 (the worker's code):\n%s" % (rc, out[-4000:]))
    check(gens == [0, 1, 2], "generations %s, want [0, 1, 2]" % gens)
    check_worker_root_cause(out, "budget spent")
    check("is spent" in out, "no line saying the budget is spent:\n%s" % out[-4000:])
    check_no_verdict(out, "no --verdict-after")
    h.log("--max-restarts=2, always exit 7: 3 generations, exit 7")


def scenario_verdict_opt_in(h):
    rc, out, gens = run(h, "verdict2", ["--verdict-after=2", "--max-restarts=5"])
    check(rc == 87, "ddprun exited %d, want 87 (the verdict):\n%s" % (rc, out[-4000:]))
    check(gens == [0, 1], "generations %s, want [0, 1]" % gens)
    line = SAME % 2 + "; stopping instead of restarting"
    check("the job stopped with a verdict (exit 87): " + line in out,
          "no line naming the verdict (%r):\n%s" % (line, out[-4000:]))
    check(root_cause(failure_summary(out)).startswith("Root Cause (" + line + "):"),
          "the root cause is not headed by the verdict:\n%s" % failure_summary(out))
    check("is spent" not in out, "the budget was spent:\n%s" % out[-4000:])
    h.log("--verdict-after=2 --max-restarts=5: exit 87 after 2 generations, budget left")


def scenario_verdict_at_budget(h):
    rc, out, gens = run(h, "verdict3", ["--verdict-after=3", "--max-restarts=2"])
    check(rc == 7, "ddprun exited %d, want 7 (the budget is spent: the worker's code):\n%s" %
          (rc, out[-4000:]))
    check(gens == [0, 1, 2], "generations %s, want [0, 1, 2]" % gens)
    root = check_worker_root_cause(out, "verdict at the budget")
    check(root.startswith("Root Cause (first observed failure):"),
          "the root cause is headed by something else:\n%s" % root)
    note = ("verdict   : " + SAME % 3 + "; the restart budget is spent as well: the exit code is "
            "the root cause's")
    check(note in root, "no verdict line (%r) in the root cause:\n%s" % (note, root))
    check("stopped with a verdict" not in out and "exitcode 87" not in out,
          "the verdict stopped the job:\n%s" % out[-4000:])
    h.log("--verdict-after=3 --max-restarts=2: exit 7 after 3 generations, the verdict a line")


SCENARIOS = {"torchrun_budget": scenario_torchrun_budget,
             "budget_exit_code": scenario_budget_exit_code,
             "verdict_opt_in": scenario_verdict_opt_in,
             "verdict_at_budget": scenario_verdict_at_budget}


if __name__ == "__main__":
    sys.exit(run_scenario(sys.argv, SCENARIOS))
