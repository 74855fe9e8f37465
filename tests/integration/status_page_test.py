"""The status pages of a running 2-node job (docs/status.md, "Status page and metrics").

  status_page_test.py page|promtool|standalone

Starts ddprund (status pages on a port from the OS, read back from --http-port-file) and two
ddprun agents of one job running the real `train` (one worker each, a dataset made here, enough
epochs to outlast the test; node rank 0's agent also serves its own pages with --http-port auto,
read back from its log). Waits (deadlines, no sleeps) until ddprund's /status shows the job
running with both nodes and metric points, then:

  page      rank 1 fails at step 150 of generation 0 (--fail-at-step; --max-restarts 2), so the
            job runs generation 1 when the page is loaded: ddprund's / in headless Chromium (a
            fresh profile, no network but loopback) must render the job, both nodes, a loss
            chart drawn from its points and generation 0's root cause; takes a screenshot ($DDP_TEST_TMP/status-page.png, also copied to
            $DDP_STATUS_SCREENSHOT when set: scripts/status_page_screenshot.sh). The agent's
            /status must show the same job and nodes.
  promtool  `promtool check metrics` accepts ddprund's and the agent's /metrics (no lint
            problem either), which show the job's two nodes and heartbeat ages.
  standalone  `ddprun --standalone --nproc-per-node 2 --http-port auto train` (no ddprund): the
            agent's own /status shows its job running with both workers and metric points, its
            /metrics passes promtool, and / serves the page with that status embedded.
  torch     the same with a torch script (status_torch_worker.py) that sends its points with
            ddprun.publish_point (docs/status.md), the package imported from the agent's
            PYTHONPATH: rank 0's reach the agent's /status as written, rank 1's never.
  recovery  the 2-node job with --restart-scope=failed; node 1's worker is SIGKILLed and replaced in
            place (docs/recovery.md): ddprund's /status lists the recovery (quorum 0.1, rank 1,
            signal 9), /metrics counts it (promtool accepts it) and the page, in Chromium, shows it
            on the job's recovery timeline; the job stays in generation 0.

Every process started here is stopped by pid (multinode_harness.Harness.stop_all).
"""
import json
import os
import re
import shutil
import signal
import subprocess
import sys
import tempfile
import urllib.request

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from multinode_harness import (BIN, RDZV_CONF, TMP, TestFailure, check,  # noqa: E402
                               poll, run_scenario, workers)

RUN_ID = "status-demo"
# --disable-dev-shm-usage: a container's /dev/shm (64 MiB by default) is too small for Chromium's
# renderer, which then dies and --dump-dom prints nothing.
CHROMIUM = ["chromium", "--headless", "--no-sandbox", "--disable-gpu", "--disable-dev-shm-usage",
            "--disable-background-networking", "--disable-component-update", "--disable-sync",
            "--no-first-run", "--hide-scrollbars", "--window-size=1280,540"]


def fetch(url, timeout=5):
    with urllib.request.urlopen(url, timeout=timeout) as r:
        return r.read().decode()


def status_of(base):
    try:
        jobs = json.loads(fetch(base + "status"))["jobs"]
    except OSError:
        return None
    return next((j for j in jobs if j["run_id"] == RUN_ID), None)


def running_with_points(job, generation=0, nodes=2):
    return (job and job["state"] == "running" and len(job["nodes"]) == nodes and
            job["generation"] >= generation and
            sum(p["gen"] >= generation for p in job["points"]) >= 4 and
            all(n["status"] for n in job["nodes"]) and job)


def write_config():
    data = os.path.join(TMP, "data")
    subprocess.run([os.path.join(BIN, "train"), "make-data", "--out", data, "--samples", "20000",
                    "--features", "32", "--classes", "4", "--shards", "2", "--seed", "1"],
                   check=True, stdout=subprocess.DEVNULL)
    config = os.path.join(TMP, "train.json")
    with open(config, "w") as f:
        json.dump({"data": data, "hidden": [64, 64], "device": "cpu", "epochs": 100000,
                   "batch_size": 64, "optimizer": "adamw", "lr": 0.002, "warmup_steps": 20,
                   "log_every": 5, "progress_seconds": 30}, f)
    return config


def agent_url(h, name):
    return poll(name + "'s status page address", lambda: re.search(
        r"status page at (http://[0-9.:\[\]]+/)", h.output(name)), 60).group(1)


def start_job(h, fail, extra_flags=()):
    config = write_config()
    port_file, http_file = os.path.join(TMP, "ddprund.port"), os.path.join(TMP, "ddprund.http")
    h.spawn("ddprund", [os.path.join(BIN, "ddprund"), "--host", "127.0.0.1", "--port", "0",
                        "--port-file", port_file, "--http-port-file", http_file])
    port = int(poll("ddprund's port file", lambda: os.path.exists(port_file) and
                    open(port_file).read().strip(), 30))
    http = int(poll("ddprund's status port file", lambda: os.path.exists(http_file) and
                    open(http_file).read().strip(), 30))
    env = dict(os.environ, DDP_NO_SLURM="1")
    fault = ["--fail-at-step", "150", "--fail-rank", "1"] if fail else []
    for node in range(2):
        extra = ["--http-port", "auto"] if node == 0 else []
        h.spawn("agent%d" % node, [os.path.join(BIN, "ddprun"), "--nnodes", "2",
                                   "--nproc-per-node", "1", "--rdzv-backend", "c10d",
                                   "--rdzv-endpoint", "127.0.0.1:%d" % port, "--rdzv-id", RUN_ID,
                                   "--rdzv-conf", RDZV_CONF, "--node-rank", str(node),
                                   "--max-restarts", "2", "--shutdown-timeout", "5"] + extra +
                list(extra_flags) +
                [os.path.join(BIN, "train"), "--config", config] + fault, env)
    return "http://127.0.0.1:%d/" % http, agent_url(h, "agent0")


def check_page(h, base, agent):
    dom = dump_dom(base)
    check('data-job="%s"' % RUN_ID in dom, "the page lists the job:\n" + dom[:3000])
    for rank in (0, 1):
        check('data-node-rank="%d"' % rank in dom, "the page lists node %d" % rank)
    loss = re.search(r'<svg[^>]*data-chart="loss"[^>]*data-points="(\d+)"', dom)
    check(loss and int(loss.group(1)) >= 4, "a loss chart with points: %s" % (loss and loss.group(0)))
    check(re.search(r'<path[^>]*d="M[0-9. ML]*L', dom) is not None, "the chart draws a line")
    cause = re.search(r'data-generation="0".*?class="cause">([^<]*)<', dom, re.S)
    check(cause and "rank 1" in cause.group(1) and "injected failure" in cause.group(1),
          "generation 0's root cause: %s" % (cause and cause.group(1)))
    shot = os.path.join(TMP, "status-page.png")
    if os.path.exists(shot):
        os.unlink(shot)
    chromium(base, "--screenshot=" + shot, lambda r: os.path.exists(shot), "took no screenshot")
    check(os.path.getsize(shot) > 10000, "a screenshot was taken")
    if os.environ.get("DDP_STATUS_SCREENSHOT"):
        shutil.copyfile(shot, os.environ["DDP_STATUS_SCREENSHOT"])
    h.log("page: job, 2 nodes, loss chart with %s points; screenshot %s" % (loss.group(1), shot))
    job = poll("the agent's /status", lambda: running_with_points(status_of(agent), 1), 30)
    check([n["rank"] for n in job["nodes"]] == [0, 1], "the agent shows both nodes")


def chromium(base, action, done, what, tries=3):
    """Headless Chromium on page `base` with `action` (--dump-dom, --screenshot=...); `done(result)`
    tells whether it did it. Chromium that did nothing at all (its renderer died: no DOM, no file,
    not a wrong one) is Chromium's own failure, so it is tried again, up to `tries` times."""
    failures = []
    for _ in range(tries):
        # Chromium puts its singleton socket in $TMPDIR/org.chromium.Chromium.XXXXXX/: a Unix socket
        # path holds at most 107 bytes, which a checkout in a deeper directory than this one (CI's)
        # overruns under $DDP_TEST_TMP, and Chromium aborts. So its profile and temporary files
        # live in a fresh short directory under /tmp, removed after each try.
        home = tempfile.mkdtemp(prefix="ddp-chromium-", dir="/tmp")
        try:
            r = subprocess.run(CHROMIUM + ["--user-data-dir=" + os.path.join(home, "profile"),
                                           "--virtual-time-budget=3000", action, base],
                               env=dict(os.environ, TMPDIR=home),
                               capture_output=True, text=True, timeout=120)
        finally:
            shutil.rmtree(home, ignore_errors=True)
        if done(r):
            return r
        failures.append("exit %d:\n%s" % (r.returncode, r.stderr[-2000:]))
        print("chromium %s (%s)" % (what, failures[-1]), flush=True)
    raise TestFailure("chromium %s in %d tries:\n%s" % (what, tries, "\n".join(failures)))


def dump_dom(base):
    return chromium(base, "--dump-dom", lambda r: r.stdout.strip(), "printed no page").stdout


def check_recovery(h, base, agent):
    pids = dict((name, p.pid) for name, p in h.procs)
    kept = poll("node 0's worker", lambda: workers(pids["agent0"]), 30)
    victims = poll("node 1's worker", lambda: workers(pids["agent1"]), 30)
    os.kill(victims[0], signal.SIGKILL)
    h.log("killed node 1's worker (pid %d)" % victims[0])
    job = poll("the recovery on ddprund's /status",
               lambda: (status_of(base) or {}).get("recoveries") and status_of(base), 60)
    rec = job["recoveries"][0]
    check(rec["generation"] == 0 and rec["quorum"] == 1 and rec["ranks"] == [1] and
          rec["how"] == ["signal 9"] and rec["node_rank"] == 1, "the recovery: %s" % rec)
    check(job["generation"] == 0, "the job stayed in generation 0: %s" % job["generation"])
    text = fetch(base + "metrics")
    promtool_accepts("ddprund", text)
    check('ddprun_job_recoveries_in_place{job="%s"} 1' % RUN_ID in text,
          "/metrics counts the recovery")
    dom = dump_dom(base)
    item = re.search(r'<li class="recovered" data-quorum="0\.1">(.*?)</li>', dom, re.S)
    check(item and "rank 1 (signal 9) replaced in place" in item.group(1),
          "the page's recovery timeline: %s\n%s" % (item and item.group(0), dom[:3000]))
    check("recoveries in place (1)" in dom, "the timeline's heading counts 1")
    check(sorted(workers(pids["agent0"])) == sorted(kept), "node 0's worker kept running")
    h.log("recovery: /status, /metrics and the page show quorum 0.1 (rank 1, signal 9)")


def check_promtool(h, base, agent):
    for name, url in (("ddprund", base), ("agent", agent)):
        text = fetch(url + "metrics")
        promtool_accepts(name, text)
        check('ddprun_job_nodes{job="%s"} 2' % RUN_ID in text, name + " shows the job's nodes")
        check(text.count("ddprun_node_heartbeat_age_seconds{") == 2, name + " shows 2 ages")
    check("ddprund_request_duration_seconds_bucket" in fetch(base + "metrics"),
          "ddprund shows its request-time histogram")
    h.log("promtool: ddprund's and the agent's /metrics pass")


def promtool_accepts(name, text):
    out = subprocess.run(["promtool", "check", "metrics"], input=text, capture_output=True,
                         text=True, timeout=60)
    check(out.returncode == 0 and not out.stdout.strip() and not out.stderr.strip(),
          "promtool accepts %s's /metrics: rc %d\n%s%s" %
          (name, out.returncode, out.stdout, out.stderr))


def start_standalone(h, entrypoint):
    h.spawn("agent0", [os.path.join(BIN, "ddprun"), "--standalone", "--nproc-per-node", "2",
                       "--rdzv-id", RUN_ID, "--http-port", "auto"] + entrypoint,
            dict(os.environ, DDP_NO_SLURM="1", PYTHON_EXEC="/usr/bin/python3"))
    return agent_url(h, "agent0")


def torch_script(h):
    url = start_standalone(h, [os.path.join(os.path.dirname(os.path.abspath(__file__)),
                                            "status_torch_worker.py")])
    job = poll("the torch script's points on the agent's /status",
               lambda: running_with_points(status_of(url), 0, 1), 120)
    for point in job["points"]:
        check(point["gen"] == 0 and point["n"] >= 1 and abs(point["loss"] - 2.0 / point["step"]) < 1e-9
              and point["samples_per_s"] == 1000.0 + point["step"] and point["time"] > 0,
              "a point as rank 0 wrote it: %s" % point)
    steps = [p["step"] for p in job["points"]]
    check(steps == sorted(steps), "points in order: %s" % steps)
    h.log("torch: %d points from ddprun.publish_point, the last %s" % (len(steps), job["points"][-1]))


def standalone(h):
    url = start_standalone(h, [os.path.join(BIN, "train"), "--config", write_config()])
    job = poll("the standalone job running with points on the agent's /status",
               lambda: running_with_points(status_of(url), 0, 1), 120)
    workers = job["nodes"][0]["status"]["workers"]
    check([w["state"] for w in workers] == ["running", "running"], "both workers run: %s" % workers)
    text = fetch(url + "metrics")
    promtool_accepts("the standalone agent", text)
    check('ddprun_job_workers{job="%s",state="running"} 2' % RUN_ID in text, "2 workers running")
    check('"run_id":"%s"' % RUN_ID in fetch(url), "the page embeds the job")
    h.log("standalone: the agent's pages show %s with %d points" % (RUN_ID, len(job["points"])))


def job_scenario(h, scenario):
    """The 2-node job against ddprund, then the check `scenario` names."""
    generation = 1 if scenario == "page" else 0
    scope = ["--restart-scope=failed"] if scenario == "recovery" else []
    base, agent = start_job(h, fail=scenario == "page", extra_flags=scope)
    job = poll("the job running generation %d with both nodes and metric points on "
               "ddprund's /status" % generation,
               lambda: running_with_points(status_of(base), generation), 120)
    h.log("ddprund shows %s: generation %s, %d points" %
          (RUN_ID, job["generation"], len(job["points"])))
    {"page": check_page, "promtool": check_promtool,
     "recovery": check_recovery}[scenario](h, base, agent)


SCENARIOS = {"standalone": standalone, "torch": torch_script,
             "page": lambda h: job_scenario(h, "page"),
             "promtool": lambda h: job_scenario(h, "promtool"),
             "recovery": lambda h: job_scenario(h, "recovery")}


if __name__ == "__main__":
    sys.exit(run_scenario(sys.argv, SCENARIOS, tails=3000))
