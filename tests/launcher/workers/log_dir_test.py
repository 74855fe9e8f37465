"""Logs that exist (issue 10, item 4), end to end with ddprun:

  log_dir_test.py temp      without --log-dir ($TMPDIR pointed at a scratch dir): a job that
                            succeeds leaves nothing; a failed job keeps exactly the dir whose error
                            file the summary names, and the file is there; SIGTERM while waiting in
                            the rendezvous leaves nothing; start lines print real values
  log_dir_test.py shared    two agents on one host share one --log-dir, each with two workers that
                            write files, through a failure and a restart: every node's files of
                            both generations are there, under node_<rank>/

Every process started here is stopped by pid (multinode_harness.Harness).
"""
import glob
import os
import re
import signal
import sys

sys.dont_write_bytecode = True  # nothing written into the source tree
sys.path.insert(0, os.path.join(os.environ["DDP_SOURCE_DIR"], "tests", "integration"))
from multinode_harness import BIN, RDZV_CONF, TMP, check, poll, run_scenario  # noqa: E402

DDPRUN = os.path.join(BIN, "ddprun")
WORKER = os.path.join(BIN, "ddp_test_worker")


def listing(path):
    out = []
    for root, dirs, files in os.walk(path):
        out += [os.path.relpath(os.path.join(root, n), path) for n in dirs + files]
    return sorted(out)


def run(h, name, argv, env, timeout=60):
    p = h.spawn(name, argv, env)
    return h.wait_exit(p, name, timeout), h.output(name)


def scenario_temp(h):
    tmpdir = os.path.join(TMP, "tmpdir")
    os.makedirs(tmpdir, exist_ok=True)
    env = dict(os.environ, TMPDIR=tmpdir, DDP_NO_SLURM="1")

    rc, out = run(h, "ok", [DDPRUN, "--nproc-per-node=2", WORKER, "--print", "2"], env)
    check(rc == 0, "a clean job exited %d:\n%s" % (rc, out))
    check(listing(tmpdir) == [], "a clean job left %s" % listing(tmpdir))
    for line in out.splitlines():
        if "[agent]" in line:
            check(not re.search(r"<[a-z ]+>", line), "a placeholder in a log line: " + line)

    rc, out = run(h, "failed", [DDPRUN, "--nproc-per-node=2", WORKER, "--fail-rank", "1",
                                "--exit", "4", "--error-message", "disk full", "--wait"], env)
    check(rc == 4, "the failed job exited %d:\n%s" % (rc, out))
    named = re.findall(r"error_file: (/\S+)", out)
    check(len(named) == 1, "want one error file named in the summary:\n%s" % out)
    check(os.path.exists(named[0]), "the summary names %s, which is gone" % named[0])
    check("disk full" in open(named[0]).read(), "the named error file is not rank 1's")
    kept = glob.glob(os.path.join(tmpdir, "ddprun_*"))
    check(len(kept) == 1 and named[0].startswith(kept[0] + "/"),
          "want the one dir holding %s kept, have %s" % (named[0], listing(tmpdir)))
    check("error files kept in %s/" % kept[0] in out,
          "ddprun did not say where the kept files are:\n%s" % out)
    for path in kept:  # this scenario's own scratch
        for root, dirs, files in os.walk(path, topdown=False):
            for n in files:
                os.unlink(os.path.join(root, n))
            for n in dirs:
                os.rmdir(os.path.join(root, n))
        os.rmdir(path)

    port = h.ddprund()
    p = h.spawn("waiting", [DDPRUN, "--nnodes=2", "--nproc-per-node=1", "--rdzv-backend=c10d",
                            "--rdzv-endpoint=127.0.0.1:%d" % port, "--rdzv-id=alone",
                            "--rdzv-conf", RDZV_CONF, WORKER], env)
    poll("the agent waiting in the rendezvous", lambda: "logs in " in h.output("waiting"), 30)
    check(len(glob.glob(os.path.join(tmpdir, "ddprun_*"))) == 1, "no temp dir while waiting")
    os.kill(p.pid, signal.SIGTERM)
    rc = h.wait_exit(p, "waiting", 30)
    check(rc == 128 + signal.SIGTERM, "SIGTERM in the rendezvous: exit %d" % rc)
    check(listing(tmpdir) == [], "SIGTERM in the rendezvous left %s" % listing(tmpdir))
    h.log("temp dirs: none left after success or SIGTERM; the failed job's error file kept")


def scenario_shared(h):
    logs = os.path.join(TMP, "logs")
    port = h.ddprund()
    env = dict(os.environ, DDP_NO_SLURM="1")
    agents = {}
    for node in (0, 1):
        agents[node] = h.spawn("node%d" % node, [
            DDPRUN, "--nnodes=2", "--nproc-per-node=2", "--node-rank=%d" % node,
            "--rdzv-backend=c10d", "--rdzv-endpoint=127.0.0.1:%d" % port, "--rdzv-id=shared",
            "--rdzv-conf", RDZV_CONF, "--max-restarts=1", "--log-dir", logs, "--tee=3",
            WORKER, "--print", "3", "--fail-rank", "3", "--fail-until-attempt", "1",
            "--exit", "9", "--error-message", "first attempt"], env)
    for node, p in agents.items():
        rc = h.wait_exit(p, "node%d" % node, 60)
        check(rc == 0, "node %d exited %d:\n%s" % (node, rc, h.output("node%d" % node)[-3000:]))
    run_dir = os.path.join(logs, "shared")
    check(sorted(os.listdir(run_dir)) == ["node_0", "node_1"], "run dir: %s" % listing(run_dir))
    for node in (0, 1):
        for attempt in (0, 1):
            for lr in (0, 1):
                d = os.path.join(run_dir, "node_%d" % node, "attempt_%d" % attempt, str(lr))
                rank = node * 2 + lr
                out = os.path.join(d, "stdout.log")
                check(os.path.exists(out), "missing %s; have %s" % (out, listing(run_dir)))
                if attempt == 1 or rank == 3:
                    check("out %d line 2" % rank in open(out).read(), "%s is incomplete" % out)
    error = os.path.join(run_dir, "node_1", "attempt_0", "1", "error.json")
    check(os.path.exists(error) and "first attempt" in open(error).read(),
          "rank 3's error file of attempt 0 is gone: %s" % listing(run_dir))
    h.log("two agents, one log dir, two generations: every file in place")


SCENARIOS = {"temp": scenario_temp, "shared": scenario_shared}


if __name__ == "__main__":
    sys.exit(run_scenario(sys.argv, SCENARIOS))
