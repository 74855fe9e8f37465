"""Hang detection end to end (issue 12, item 4): a hung worker is found within --hang-timeout + 2 s
(bounded on CLOCK_MONOTONIC, which the workers share: each prints the moment it stops), its stacks
are taken before it is ended, and the job restarts or reports them in its failure summary.

  hang_test.py train_summary   the real `train`, 2 ranks over Gloo, rank 1 sleeps inside step 21
                               (--hang-at-step 20); --max-restarts=0: the summary names rank 1 as the
                               root cause with its gdb stacks (injectedHang), rank 0 (waiting in the
                               allreduce) as collateral; stacks.txt whole in --log-dir
  hang_test.py train_restart   the same with --max-restarts=1: the hang and its stacks are logged,
                               the job restarts and finishes (exit 0)
  hang_test.py train_cross_node  the same across 2 agents (one rank each) and a ddprund: each agent
                               finds its own rank hung; rank 0's waiter is frozen before gdb, so
                               its stack still shows the wait after node 1 ended rank 1; both
                               agents print the same summary: rank 1 root cause, rank 0 collateral
  hang_test.py torch_gloo      a torch 1.13 Gloo script with no code for ddprun (only its output and
                               CPU time stop): rank 1 sleeps inside a step, rank 0 waits in
                               all_reduce; both are found, with Python stacks (faulthandler); the
                               job restarts and finishes
  hang_test.py file_timer      torch's FileTimerClient, unchanged, on the FIFO ddprun serves with
                               TORCHELASTIC_ENABLE_FILE_TIMER=1 (no --hang-timeout): a released
                               scope does nothing, an expired one is rank 1's hang, with its stacks
  hang_test.py no_code         a script that just sleeps is found (output and CPU time stand
                               still); a rank that only talks and a rank that only computes are not

--hang-timeout is 5 s for `train` and 8 s for torch: a rank that has started waits for the others
without any progress (torch's init_process_group), and on a loaded 2-core machine importing torch
alone can take several seconds longer on one rank than on the other.

Every process started here is stopped by pid (multinode_harness.Harness).
"""
import glob
import os
import re
import sys
import time

sys.dont_write_bytecode = True  # nothing written into the source tree
sys.path.insert(0, os.path.join(os.environ["DDP_SOURCE_DIR"], "tests", "integration"))
from multinode_harness import (BIN, PY, RDZV_CONF, SRC, TMP, check, failure_summary,  # noqa: E402
                               poll, root_cause, run_scenario, train_config)

TRAIN = os.path.join(BIN, "train")
DDPRUN = os.path.join(BIN, "ddprun")
WORKER = os.path.join(SRC, "tests", "launcher", "hang", "hang_worker.py")
MARK = re.compile(r"from monotonic (\d+\.\d+)")
TRAIN_S = 5  # --hang-timeout for train
TORCH_S = 8  # and for torch scripts (see the header)


def env(**extra):
    e = {k: v for k, v in os.environ.items() if not k.startswith(("PET_", "TORCHELASTIC_"))}
    e.update(DDP_NO_SLURM="1", PYTHON_EXEC=PY, **extra)
    return e


def detection_bound(h, p, name, timeout_s):
    """Waits for ddprun's first "hangs:" line and checks it came within timeout_s + 2 s of the
    worker's stop mark (a bound: both are seen no earlier than they happen). Fails at once when
    ddprun (p) exits first."""
    def seen(what):
        def pred():
            text = h.output(name)
            check(what(text) or p.poll() is None,
                  "ddprun exited %s before that:\n%s" % (p.poll(), text[-4000:]))
            return what(text)
        return pred
    stops = poll("the stop mark of " + name, seen(lambda t: MARK.findall(t)), 120)
    stopped = float(stops[0])
    poll("ddprun finding the hang", seen(lambda t: "hangs: " in t), timeout_s + 30)
    seen = time.monotonic()
    h.log("hang seen %.2f s after the worker stopped (--hang-timeout %g)" % (seen - stopped, timeout_s))
    check(seen - stopped <= timeout_s + 2,
          "the hang was seen %.2f s after the worker stopped: more than %g + 2 s" %
          (seen - stopped, timeout_s))


def stacks_files(log_dir, attempt, local_rank):
    return glob.glob(os.path.join(log_dir, "*", "node_0", "attempt_%d" % attempt, str(local_rank),
                                  "stacks.txt"))


def run_train(h, name, restarts):
    log_dir = os.path.join(TMP, name + "_logs")
    p = h.spawn(name, [DDPRUN, "--nproc-per-node=2", "--hang-timeout=%g" % TRAIN_S, "--max-restarts=%d" % restarts,
                       "--log-dir", log_dir, "--shutdown-timeout=10", TRAIN, "--config",
                       train_config(4096, 16, 4, hidden=(32,), epochs=4), "--hang-at-step", "20",
                       "--hang-rank", "1"], env())
    detection_bound(h, p, name, TRAIN_S)
    return p, log_dir


def scenario_train_summary(h):
    p, log_dir = run_train(h, "train", 0)
    rc = h.wait_exit(p, "train", 90)
    out = h.output("train")
    check(rc == 137, "ddprun exited %d, want 137 (rank 1 ended by SIGKILL):\n%s" % (rc, out[-4000:]))
    summary = failure_summary(out)
    root = root_cause(summary)
    check(re.search(r"rank\s*: 1 \(local_rank: 1\)", root), "root cause is not rank 1:\n" + summary)
    check("hang      : no progress report for" in root, "no hang line for rank 1:\n" + summary)
    check("injectedHang" in root, "rank 1's stacks are not in the summary:\n" + summary)
    others = summary[:summary.index("Root Cause")]
    check(re.search(r"rank\s*: 0 \(local_rank: 0\)", others), "rank 0 not listed:\n" + summary)
    check("waiting for its peers while rank 1" in others,
          "rank 0 (in the allreduce) is not collateral:\n" + summary)
    files = stacks_files(log_dir, 0, 1)
    check(files and "injectedHang" in open(files[0]).read(),
          "no whole stacks.txt with injectedHang for rank 1 under %s" % log_dir)
    h.log("summary: rank 1 hung (root cause, gdb stacks), rank 0 collateral; stacks.txt kept")


def scenario_train_restart(h):
    p, log_dir = run_train(h, "train", 1)
    rc = h.wait_exit(p, "train", 120)
    out = h.output("train")
    check(rc == 0, "ddprun exited %d, want 0 (restarted and finished):\n%s" % (rc, out[-4000:]))
    check("restarting the job" in out, "no restart:\n" + out[-4000:])
    check(re.search(r"stacks of worker rank 1 .*\n(.*\n)*.*injectedHang", out),
          "rank 1's stacks were not logged:\n" + out[-4000:])
    check(stacks_files(log_dir, 0, 1), "no stacks.txt of rank 1 in attempt 0")
    check(glob.glob(os.path.join(log_dir, "*", "node_0", "attempt_1", "0")), "no attempt 1")
    check("FAILED" not in out, "a failure summary after a successful restart:\n" + out[-4000:])
    h.log("hang logged with stacks, job restarted and finished")


def scenario_train_cross_node(h):
    port = h.ddprund()
    config = train_config(4096, 16, 4, hidden=(32,), epochs=4)
    agents = {}
    for node in (0, 1):
        name = "node%d" % node
        agents[name] = h.spawn(name, [
            DDPRUN, "--nnodes=2", "--nproc-per-node=1", "--node-rank=%d" % node,
            "--rdzv-backend=c10d", "--rdzv-endpoint=127.0.0.1:%d" % port, "--rdzv-id=hang",
            "--rdzv-conf", RDZV_CONF, "--hang-timeout=%g" % TRAIN_S, "--shutdown-timeout=10", TRAIN,
            "--config", config, "--hang-at-step", "20", "--hang-rank", "1"], env())
    detection_bound(h, agents["node1"], "node1", TRAIN_S)
    summaries = {}
    for name, p in agents.items():
        rc = h.wait_exit(p, name, 120)
        out = h.output(name)
        check(rc == 137, "%s exited %d, want 137 (rank 1 ended by SIGKILL):\n%s" % (name, rc, out[-4000:]))
        summaries[name] = failure_summary(out)
    check(summaries["node0"] == summaries["node1"], "the agents print different summaries:\n%s\n---\n%s"
          % (summaries["node0"], summaries["node1"]))
    summary = summaries["node0"]
    root = root_cause(summary)
    check(re.search(r"rank\s*: 1 \(local_rank: 0\)", root) and "injectedHang" in root,
          "root cause is not rank 1 with its stacks:\n" + summary)
    others = summary[:summary.index("Root Cause")]
    check("waiting for its peers while rank 1" in others and "GlooCommunicator" in others,
          "rank 0 is not collateral with its wait in the stacks:\n" + summary)
    h.log("both agents: rank 1 hung (root cause), rank 0 frozen in its allreduce (collateral)")


def scenario_torch_gloo(h):
    p = h.spawn("torch", [DDPRUN, "--nproc-per-node=2", "--hang-timeout=%g" % TORCH_S, "--max-restarts=1",
                          "--shutdown-timeout=10", WORKER, "gloo_sleep"], env())
    detection_bound(h, p, "torch", TORCH_S)
    rc = h.wait_exit(p, "torch", 180)
    out = h.output("torch")
    check(rc == 0, "ddprun exited %d, want 0 (restarted and finished):\n%s" % (rc, out[-4000:]))
    check(re.search(r"stacks of worker rank 1 .*\n(.*\n)*?.*in sleep_inside_step", out),
          "rank 1's Python stacks were not logged:\n" + out[-4000:])
    check(re.search(r"stacks of worker rank 0 .*\n(.*\n)*?.*in all_reduce", out),
          "rank 0's Python stacks (in all_reduce) were not logged:\n" + out[-4000:])
    for rank in (0, 1):
        check("rank %d finished generation 1" % rank in out, "rank %d did not finish:\n%s" %
              (rank, out[-4000:]))
    h.log("both ranks found hung with Python stacks; the job restarted and finished")


def scenario_file_timer(h):
    fifo = os.path.join(TMP, "watchdog.fifo")
    p = h.spawn("timer", [DDPRUN, "--nproc-per-node=2", "--shutdown-timeout=10", WORKER, "file_timer"],
                env(TORCHELASTIC_ENABLE_FILE_TIMER="1", TORCHELASTIC_TIMER_FILE=fifo))
    detection_bound(h, p, "timer", 1)  # the scope's own 1 s
    rc = h.wait_exit(p, "timer", 60)
    out = h.output("timer")
    check(rc == 134, "ddprun exited %d, want 134 (SIGABRT: Python's stacks):\n%s" % (rc, out[-4000:]))
    check(out.count("a 5 s scope released") == 2, "the released scopes did not pass:\n" + out[-4000:])
    root = root_cause(failure_summary(out))
    check(re.search(r"rank\s*: 1 \(local_rank: 1\)", root), "root cause is not rank 1:\n" + root)
    check(re.search(r"hang\s*: file timer '.*' of pid \d+ expired", root), "no timer hang:\n" + root)
    check("in stuck_in_scope" in root, "rank 1's stacks are not in the summary:\n" + root)
    check("stopped by ddprun" in failure_summary(out).split("Root Cause")[0],
          "rank 0 (no timer expired) should be stopped, not hung:\n" + out[-4000:])
    check(not os.path.exists(fifo), "the FIFO %s outlived ddprun" % fifo)
    h.log("torch's FileTimerClient worked unchanged; the expired scope was rank 1's hang")


def scenario_no_code(h):
    p = h.spawn("sleep", [DDPRUN, "--nproc-per-node=3", "--hang-timeout=2", "--shutdown-timeout=10",
                          WORKER, "just_sleep"], env())
    detection_bound(h, p, "sleep", 2)
    rc = h.wait_exit(p, "sleep", 60)
    out = h.output("sleep")
    check(rc == 134, "ddprun exited %d, want 134 (SIGABRT: Python's stacks):\n%s" % (rc, out[-4000:]))
    summary = failure_summary(out)
    root = root_cause(summary)
    check(re.search(r"rank\s*: 2 \(local_rank: 2\)", root), "root cause is not rank 2:\n" + summary)
    check("in just_sleep" in root, "rank 2's stacks are not in the summary:\n" + summary)
    others = summary.split("Root Cause")[0]
    check(others.count("stopped by ddprun") == 2 and "hang      :" not in others,
          "the talking and the computing rank were taken as hung:\n" + summary)
    h.log("the sleeping rank was found; the talking and the computing ones were not")


SCENARIOS = {"train_summary": scenario_train_summary, "train_restart": scenario_train_restart,
             "train_cross_node": scenario_train_cross_node,
             "torch_gloo": scenario_torch_gloo, "file_timer": scenario_file_timer,
             "no_code": scenario_no_code}


if __name__ == "__main__":
    sys.exit(run_scenario(sys.argv, SCENARIOS))
