"""Straggler detection end to end (issue 22, item 3; docs/running.md "Straggler detection").

  straggler_test.py slow|even|python|exclude

slow    ddprund and two ddprun agents (node ranks 0 and 1, two workers each: world 4) running the
        real `train` with --straggler-threshold 3 --straggler-window 2 and rank 3 slowed by
        `train --slow-rank 3 --slow-ms 60` (its compute time grows by 60 ms a step, an order of
        magnitude over the others'). Rank 3 lives on node 1, the median is node rank 0's: the
        judgement crosses nodes. Within a deadline ddprund's /status lists rank 3 (and only it)
        under the job's "stragglers", /metrics has ddprun_rank_straggler 1 for rank 3 and 0 for
        the others and a ddprun_rank_step_seconds per rank, and promtool accepts it; node 1's
        agent logged "rank 3 is a straggler: compute ... vs job median ..."; ddprund's page, in
        headless Chromium, marks rank 3's worker and lists it as a straggler.
even    the same job without --slow-rank: once every rank has a figure and node rank 0 published
        the median, /status is read until three windows have passed on this test's own clock,
        and no reading, nor any agent's log, names a straggler.
exclude the slow job as 1:2 nodes under --restart-scope=failed with --exclude-stragglers: node 1
        (rank 3's) leaves the job for its cooldown, named on /status with its straggler line;
        node 0 goes on in place with world size 2, its workers the same processes.
python  `ddprun --standalone --nproc-per-node 3 --http-port auto` with a Python worker that sends
        beats with `ddprun.report_progress` (rank 2 reports 10x the others' compute time; the
        worker imports the package from nowhere but the PYTHONPATH the agent gives it): the
        agent's own /status flags rank 2 — the package speaks the protocol the agent reads.

Judged on compute time, which a loaded machine inflates for every rank alike; the slowdown is
several times the threshold, so CPU contention on a 2-core box cannot make or hide a straggler.
Every process started here is stopped by pid (multinode_harness.Harness.stop_all).
"""
import json
import os
import re
import subprocess
import sys
import time
import urllib.request

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from multinode_harness import BIN, RDZV_CONF, TMP, check, poll, run_scenario  # noqa: E402
from status_page_test import dump_dom  # noqa: E402

RUN_ID = "straggler-demo"
WINDOW_S = 2
FLAGS = ["--straggler-threshold", "3", "--straggler-window", str(WINDOW_S)]


def fetch(url, timeout=5):
    with urllib.request.urlopen(url, timeout=timeout) as r:
        return r.read().decode()


def status_of(base):
    try:
        jobs = json.loads(fetch(base + "status"))["jobs"]
    except OSError:
        return None
    return next((j for j in jobs if j["run_id"] == RUN_ID), None)


def figures(job):
    """rank -> compute_s of every worker entry with a figure."""
    out = {}
    for node in (job or {}).get("nodes", []):
        for w in ((node.get("status") or {}).get("workers") or []):
            if isinstance(w.get("compute_s"), (int, float)):
                out[w["rank"]] = w["compute_s"]
    return out


def write_config():
    data = os.path.join(TMP, "data")
    subprocess.run([os.path.join(BIN, "train"), "make-data", "--out", data, "--samples", "20000",
                    "--features", "32", "--classes", "4", "--shards", "4", "--seed", "1"],
                   check=True, stdout=subprocess.DEVNULL)
    config = os.path.join(TMP, "train.json")
    with open(config, "w") as f:
        json.dump({"data": data, "hidden": [64, 64], "device": "cpu", "epochs": 100000,
                   "batch_size": 64, "optimizer": "sgd", "lr": 0.01, "log_every": 50,
                   "progress_seconds": 30}, f)
    return config


def start_job(h, slow, nnodes="2", extra=()):
    config = write_config()
    port_file, http_file = os.path.join(TMP, "ddprund.port"), os.path.join(TMP, "ddprund.http")
    h.spawn("ddprund", [os.path.join(BIN, "ddprund"), "--host", "127.0.0.1", "--port", "0",
                        "--port-file", port_file, "--http-port-file", http_file])
    port = int(poll("ddprund's port file", lambda: os.path.exists(port_file) and
                    open(port_file).read().strip(), 30))
    http = int(poll("ddprund's status port file", lambda: os.path.exists(http_file) and
                    open(http_file).read().strip(), 30))
    env = dict(os.environ, DDP_NO_SLURM="1")
    fault = ["--slow-rank", "3", "--slow-ms", "60"] if slow else []
    for node in range(2):
        h.spawn("agent%d" % node, [os.path.join(BIN, "ddprun"), "--nnodes", nnodes,
                                   "--nproc-per-node", "2", "--rdzv-backend", "c10d",
                                   "--rdzv-endpoint", "127.0.0.1:%d" % port, "--rdzv-id", RUN_ID,
                                   "--rdzv-conf", RDZV_CONF, "--node-rank", str(node),
                                   "--shutdown-timeout", "5"] + FLAGS + list(extra) +
                [os.path.join(BIN, "train"), "--config", config] + fault, env)
    return "http://127.0.0.1:%d/" % http


def promtool_accepts(text):
    out = subprocess.run(["promtool", "check", "metrics"], input=text, capture_output=True,
                         text=True, timeout=60)
    check(out.returncode == 0 and not out.stdout.strip() and not out.stderr.strip(),
          "promtool accepts /metrics: rc %d\n%s%s" % (out.returncode, out.stdout, out.stderr))


def slow(h):
    base = start_job(h, slow=True)
    job = poll("rank 3 flagged on ddprund's /status",
               lambda: (status_of(base) or {}).get("stragglers") and status_of(base), 120)
    check([s["rank"] for s in job["stragglers"]] == [3], "only rank 3 is flagged: %s" % job["stragglers"])
    flagged = job["stragglers"][0]
    check(flagged["node_rank"] == 1 and flagged["x_median"] > 3,
          "rank 3 is on node 1, over 3x the median: %s" % flagged)
    check(job["step_median_s"] and job["step_median_s"] > 0, "the job's median: %s" % job["step_median_s"])
    h.log("ddprund flags rank 3: %.1f ms/step vs median %.1f ms" %
          (flagged["compute_s"] * 1000, job["step_median_s"] * 1000))
    text = fetch(base + "metrics")
    promtool_accepts(text)
    for rank in range(4):
        check(re.search(r'ddprun_rank_step_seconds\{job="%s",rank="%d"\} [0-9.e-]+' % (RUN_ID, rank),
                        text), "a step time for rank %d" % rank)
        want = 1 if rank == 3 else 0
        check('ddprun_rank_straggler{job="%s",rank="%d"} %d' % (RUN_ID, rank, want) in text,
              "ddprun_rank_straggler of rank %d is %d:\n%s" % (rank, want, text[-1500:]))
    check('ddprun_job_step_median_seconds{job="%s"}' % RUN_ID in text, "the median's gauge")
    line = poll("node 1's agent's log line", lambda: re.search(
        r"rank 3 is a straggler: compute [0-9.]+ ms/step vs job median [0-9.]+ ms \(x[0-9.]+\) "
        r"for \d+ s", h.output("agent1")), 10)
    check("is a straggler" not in h.output("agent0"), "node 0's agent flags none of its ranks")
    check('"stragglers":[{' in fetch(base), "the page embeds the flagged rank")
    dom = dump_dom(base)  # headless Chromium, as status_page_test.py
    check('data-stragglers="3"' in dom and re.search(r'class="w running straggler" data-rank="3"', dom),
          "the page shows rank 3 as a straggler:\n" + dom[:3000])
    h.log("metrics, promtool, page and node 1's log (%r) agree" % line.group(0))


def exclude(h):
    """The slow job as 1:2 nodes under --restart-scope=failed with --exclude-stragglers: node 1,
    whose rank 3 is flagged, leaves the job for its cooldown; node 0 trains on in place with
    world size 2, its workers the same processes; the exclusion names the straggler."""
    from multinode_harness import workers
    base = start_job(h, slow=True, nnodes="1:2",
                     extra=["--restart-scope=failed", "--exclude-stragglers",
                            "--exclude-cooldown", "600"])
    poll("both nodes training", lambda: len(figures(status_of(base))) == 4, 120)
    kept = sorted(workers(h.procs[1][1].pid))
    check(len(kept) == 2, "node 0 runs %s" % kept)
    poll("node 1 leaving", lambda: "leaving this node out of the job" in h.output("agent1"), 120)
    check(re.search(r"rank 3 is a straggler: .*--exclude-stragglers", h.output("agent1")),
          "node 1 says it leaves for its straggler:\n" + h.output("agent1")[-3000:])
    poll("node 0 going on in place", lambda: "formed in place: node rank 0 of 1" in h.output("agent0"), 60)
    job = poll("the exclusion on ddprund's /status",
               lambda: (status_of(base) or {}).get("exclusions") and status_of(base), 30)
    check("rank 3 is a straggler" in job["exclusions"][0]["why"] and job["nodes_excluded"] == 1,
          "the exclusion: %s" % job["exclusions"])
    poll("node 0's two workers stepping on alone", lambda: len(figures(status_of(base))) == 2, 60)
    check(sorted(workers(h.procs[1][1].pid)) == kept, "node 0's workers were restarted")
    check("restarting the job" not in h.output("agent0"), "node 0 restarted the job")


def even(h):
    base = start_job(h, slow=False)
    poll("every rank's figure and the job's median on ddprund's /status",
         lambda: len(figures(status_of(base))) == 4 and (status_of(base) or {}).get("step_median_s"),
         120)
    start, readings = time.monotonic(), 0
    while time.monotonic() - start < 3 * WINDOW_S + 2:
        job = status_of(base)
        check(job and job["stragglers"] == [], "no straggler in an even job: %s" %
              (job and job["stragglers"], ))
        readings += 1
        time.sleep(0.2)  # pacing the readings of a duration, not waiting for an event
    for name in ("agent0", "agent1"):
        check("is a straggler" not in h.output(name), name + " flags no rank")
    h.log("%d readings over %d s: no straggler; figures %s" %
          (readings, 3 * WINDOW_S + 2, figures(status_of(base))))


PY_WORKER = r"""
import os, time
import ddprun
rank = int(os.environ["RANK"])
compute = 0.02 if rank == 2 else 0.002
for step in range(1, 10**9):
    ddprun.report_progress(step, compute_s=compute)
    time.sleep(0.01)
"""


def python_helper(h):
    script = os.path.join(TMP, "beats_worker.py")
    with open(script, "w") as f:
        f.write(PY_WORKER)
    h.spawn("agent0", [os.path.join(BIN, "ddprun"), "--standalone", "--nproc-per-node", "3",
                       "--rdzv-id", RUN_ID, "--http-port", "auto"] + FLAGS + [script],
            dict(os.environ, DDP_NO_SLURM="1", PYTHON_EXEC="/usr/bin/python3"))
    url = poll("the agent's status page address", lambda: re.search(
        r"status page at (http://[0-9.:\[\]]+/)", h.output("agent0")), 60).group(1)
    job = poll("rank 2 flagged on the agent's /status",
               lambda: (status_of(url) or {}).get("stragglers") and status_of(url), 60)
    check([s["rank"] for s in job["stragglers"]] == [2], "only rank 2: %s" % job["stragglers"])
    got = figures(job)
    check(abs(got[2] - 0.02) < 1e-9 and abs(got[0] - 0.002) < 1e-9,
          "the package's compute times arrive as sent: %s" % got)
    h.log("ddprun.report_progress's beats flag rank 2 (%s)" % got)


SCENARIOS = {"slow": slow, "even": even, "python": python_helper, "exclude": exclude}


if __name__ == "__main__":
    sys.exit(run_scenario(sys.argv, SCENARIOS, tails=3000))
