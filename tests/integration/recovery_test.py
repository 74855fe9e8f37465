"""Recovery in place with real agents and real `train` workers (ddprun --restart-scope=failed).

  recovery_test.py SCENARIO [KILLS]

  kills_1x4          one node, 4 workers: KILLS (default 100) random worker SIGKILLs, each after
                     the job made progress since the last one; the job ends with the parameters of
                     a fault-free run (train's "params crc32c"), every kill replaced in place; the
                     job's length follows KILLS (2.4 epochs a kill, at least 24)
  kills_2x2          two agents with 2 workers each on one ddprund: KILLS (default 20) SIGKILLs
                     alternating between the nodes; bit-identical to the fault-free 2x2 run
  second_failure     a worker killed while the job recovers from the previous kill (its agent has
                     just logged the replacement): the job still ends bit-identical
  all_state_lost     every worker killed at once: no process holds the state, so the agent stops
                     replacing and restarts every worker (generation 1); the job finishes
  replacement_crash  the first replacement process exits 7 at start: it is replaced in turn, and
                     the job ends bit-identical (--standby-workers 0: a new process each time)
  standby            a standby process killed while it waits is logged and started again; the
                     next worker killed is replaced by that standby; bit-identical
  standby_agent_kill ddprun SIGKILLed while its standby waits: the standby's directory and FIFO
                     under $TMPDIR go with it (its guardian removes them), and the standby too
  metrics_lines      KILLS (default 30) worker SIGKILLs on one node of 4 with a metrics line every
                     step: the metrics file has exactly one line per step done, 1..N, also for a
                     step whose loss allreduce a kill interrupted
  budget             --max-restarts 1 and two kills: the second spends nothing more; the job fails
                     with the killed worker as root cause and the first kill "recovered in place"
  not_capable        workers that do not link worker_runtime (a Python program): a kill restarts
                     every worker, and the agent says why in one line
  donor_killed       KILLS (default 5) times a worker is SIGKILLed and then its state's donor as
                     soon as it logs that it hands the state over (while it sends): the others
                     keep their processes, none leaves "still blocked", and the job ends
                     bit-identical
  sigstop            a worker SIGSTOPped 5 s, then continued: the job ends bit-identical with that
                     process kept and nothing replaced
  joined_kills       KILLS (default 4) kills of one local rank's process, each replacement killed
                     as soon as the job stepped on with it: no back-off (none failed at start);
                     bit-identical

Nodes lost and regained in place: recovery_nodes_test.py.

Progress is read from the metrics file rank 0 appends (one line every 5 steps). Worker pids are
the agent's grandchildren (agent -> guardian -> worker) named `train`. Every process started here
is stopped by pid.
"""
import glob
import json
import os
import random
import re
import signal
import subprocess
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from multinode_harness import (BIN, TMP, TestFailure, alive, c10d, check,  # noqa: E402
                               failure_summary, is_standby, json_lines, poll, process_tree,
                               root_cause, run_scenario, train_config, workers)

TRAIN = os.path.join(BIN, "train")


def last_step(metrics):
    steps = [line["step"] for line in json_lines(metrics)]
    return max(steps) if steps else -1


class StepTail:
    """The last step in a metrics file another process appends to, read from where the previous
    call stopped: the kill loop polls it every few ms, whatever the file's length."""

    def __init__(self, path):
        self.path, self.offset, self.step = path, 0, -1

    def __call__(self):
        try:
            with open(self.path, "rb") as f:
                f.seek(self.offset)
                text = f.read()
        except FileNotFoundError:
            return self.step
        complete = text[:text.rfind(b"\n") + 1]  # a line still being written waits for the next call
        self.offset += len(complete)
        for line in complete.splitlines():
            if line.startswith(b"{"):
                self.step = max(self.step, json.loads(line)["step"])
        return self.step


def finish(h, p, name, metrics, stall=120):
    """Waits for agent `p` to exit for as long as the job steps on (rank 0's metrics file): a slow
    machine only makes it longer; a job that makes no step in `stall` s fails the test."""
    step, seen = last_step(metrics), time.monotonic()
    while True:
        try:
            return p.wait(timeout=5)
        except subprocess.TimeoutExpired:
            pass
        now = last_step(metrics)
        if now != step:
            step, seen = now, time.monotonic()
        elif time.monotonic() - seen > stall:
            raise TestFailure("%s (pid %d) made no step in %d s (last step %d):\n%s" %
                              (name, p.pid, stall, step, h.output(name)[-3000:]))


def params_crc(text):
    m = re.findall(r"params crc32c ([0-9a-f]{8})", text)
    check(m, "no 'params crc32c' line in:\n" + text[-3000:])
    return m[-1]


class Job:
    """One training job: `nodes` agents of `nproc` workers each (one agent runs standalone)."""

    def __init__(self, h, tag, nodes, nproc, config, flags=(), command=None, env=None):
        self.h, self.tag, self.nodes = h, tag, nodes
        self.metrics = os.path.join(TMP, tag + ".metrics.jsonl")
        if os.path.exists(self.metrics):
            os.unlink(self.metrics)
        cmd = command or [TRAIN, "--config", config, "--metrics", self.metrics]
        self.agents = []
        if nodes == 1:
            self.agents.append(h.spawn(tag + "0", [os.path.join(BIN, "ddprun"), "--standalone",
                                                   "--nproc-per-node", str(nproc),
                                                   "--shutdown-timeout", "5", *flags, *cmd],
                                           env))
        else:
            if not hasattr(h, "rdzv_port"):
                h.rdzv_port = h.ddprund()
            port = h.rdzv_port
            for n in range(nodes):
                argv = [os.path.join(BIN, "ddprun")] + c10d(port, nodes, nproc, run_id=tag) + \
                       ["--node-rank", str(n), "--shutdown-timeout", "5", *flags, *cmd]
                env = dict(os.environ, DDP_NO_SLURM="1")
                self.agents.append(h.spawn("%s%d" % (tag, n), argv, env))

    def wait(self):
        return [finish(self.h, p, "%s%d" % (self.tag, i), self.metrics)
                for i, p in enumerate(self.agents)]

    def output(self):
        return "".join(self.h.output("%s%d" % (self.tag, i)) for i in range(self.nodes))

    def workers(self, node=0, name="train"):
        """Node `node`'s workers: standby processes count once their agent handed them a rank."""
        return workers(self.agents[node].pid, name, log=self.output())

    def standbys(self, node=0):
        """Node `node`'s standby processes still waiting for a rank."""
        tree = process_tree()
        return sorted(set(w for g in tree.get(self.agents[node].pid, []) for w in tree.get(g, [])
                          if is_standby(w)) - set(self.workers(node)))

    def replacements(self, cause=""):
        """Workers replaced in place (only those that failed with `cause`, e.g. "SIGKILL")."""
        return len(re.findall(r"%s[^\n]*; replacing in place \(quorum" % re.escape(cause),
                              self.output()))


def config(epochs):
    return train_config(20000, 32, 4, shards=4, hidden=(64, 64), epochs=epochs, batch_size=64,
                        log_every=5, optimizer="adamw", lr=0.002, check_params_every=50)


def reference(h, nodes, nproc, cfg):
    job = Job(h, "ref", nodes, nproc, cfg)
    check(job.wait() == [0] * nodes, "the fault-free job failed:\n" + job.output()[-3000:])
    return params_crc(job.output())


def steps_of(text):
    """The number of steps train ran ("done: N steps")."""
    m = re.findall(r"done: (\d+) steps", text)
    check(m, "no 'done: N steps' line in:\n" + text[-3000:])
    return int(m[-1])


def stacks(job):
    """For a hang's message: the job's last log lines (what the ranks said they wait for), then
    every worker's threads' stacks (gdb), the frames of this project and of Gloo only, so that a
    log cut to its first lines still shows every worker."""
    out = ["the job's last log lines:"] + job.output().splitlines()[-40:]
    for agent in job.agents:
        for w in workers(agent.pid, log=job.output()):
            r = subprocess.run(["gdb", "-p", str(w), "-batch", "-ex", "thread apply all bt 24"],
                               capture_output=True, text=True, timeout=60)
            frames = [l for l in r.stdout.splitlines() if l.startswith("Thread") or
                      l.startswith("#") and ("ddp::" in l or "gloo::" in l)]
            out.append("--- pid %d\n%s" % (w, "\n".join(frames)))
    # Each worker's TCP sockets (state, ends, descriptor), for a build that waits on a peer.
    pids = {w for agent in job.agents for w in workers(agent.pid, log=job.output())}
    r = subprocess.run(["ss", "-tanp"], capture_output=True, text=True, timeout=60)
    out.append("--- TCP sockets of the workers")
    out += [l for l in r.stdout.splitlines() if any("pid=%d," % w in l for w in pids)]
    return "\n".join(out)


def kill_loop(h, job, kills, pick, steps=None):
    """Kills `kills` workers, each once the job stepped on since the last kill (the replacement
    joined and training resumed). With `steps` (the job's length), none in its last tenth: a worker
    killed as its peers finish has no quorum left to join."""
    done, since, killed = 0, -1, set()
    step = StepTail(job.metrics)
    while done < kills:
        try:
            # Polled every 5 ms: the job steps on while this loop reacts, and a slow reaction on a
            # busy machine would spend the job's steps before every kill is done.
            poll("progress after kill %d" % done, lambda: step() > since + 5 or
                 any(p.poll() is not None for p in job.agents), 120, interval=0.005)
        except TestFailure as e:
            raise TestFailure("%s; %s" % (e, stacks(job)))
        check(all(p.poll() is None for p in job.agents),
              "the job ended after %d of %d kills:\n%s" % (done, kills, job.output()[-3000:]))
        check(steps is None or step() < steps * 0.9,
              "the job neared its end (step %d of %d) after %d of %d kills" %
              (step(), steps or 0, done, kills))
        victims = [v for v in pick(done) if v not in killed]  # a dying process counts once
        if not victims:
            continue
        victim = random.choice(victims)
        try:
            os.kill(victim, signal.SIGKILL)
            killed.add(victim)
            done += 1
        except ProcessLookupError:
            pass
        since = step()  # read after the kill: the next wait counts the steps made since it
    h.log("%d workers killed" % kills)


def ddprund_page(h, path):
    """ddprund's `path` (status, metrics) as text."""
    import urllib.request
    m = re.search(r"status on (http://\S+/)", h.output("ddprund"))
    check(m, "ddprund printed no status address:\n" + h.output("ddprund")[-2000:])
    with urllib.request.urlopen(m.group(1) + path, timeout=10) as r:
        return r.read().decode()


def job_status(h, job_id):
    jobs = [j for j in json.loads(ddprund_page(h, "status"))["jobs"] if j["run_id"] == job_id]
    return jobs[0] if jobs else {}


def check_status(h, job_id, kills):
    """ddprund's /status lists the job's recoveries in place and /metrics counts them."""
    def recoveries():
        return job_status(h, job_id).get("recoveries", [])
    got = poll("every recovery on /status", lambda: len(recoveries()) >= kills and recoveries(), 30)
    check(all(r["quorum"] >= 1 and r["ranks"] for r in got), "recoveries: %s" % got[:3])
    metrics = ddprund_page(h, "metrics")
    line = re.search(r'ddprun_job_recoveries_in_place\{job="%s"\} (\d+)' % job_id, metrics)
    check(line and int(line.group(1)) >= kills, "/metrics: %s" % (line and line.group(0)))


def bit_identical(h, nodes, nproc, kills, epochs):
    cfg = config(epochs)
    want = reference(h, nodes, nproc, cfg)
    steps = steps_of(h.output("ref0"))
    job = Job(h, "ip", nodes, nproc, cfg, ["--restart-scope=failed", "--max-restarts", str(kills + 10)])
    poll("the first metrics", lambda: last_step(job.metrics) >= 0, 120)
    kill_loop(h, job, kills, lambda i: job.workers(i % nodes), steps)
    if nodes > 1:
        check_status(h, "ip", kills)
    check(job.wait() == [0] * nodes, "the job failed:\n" + job.output()[-4000:])
    # A worker may also fail by itself while its peers recover (worker_runtime's watchdog ends a
    # rank stuck in a superseded quorum's collective); it is replaced too, and the result holds.
    check(job.replacements("killed by SIGKILL") == kills,
          "%d replacements of killed workers for %d kills" % (job.replacements("killed by SIGKILL"), kills))
    got = params_crc(job.output())
    check(got == want, "parameters differ from the fault-free run: %s vs %s" % (got, want))
    check("restarting the job" not in job.output(), "a kill restarted every worker")
    h.log("bit-identical after %d kills (params crc32c %s)" % (kills, got))


def second_failure(h):
    """Five times: a worker is killed, then — once its agent started the replacement, while the
    others rebuild — another one of the original processes; one original process always lives."""
    cfg = config(40)
    want = reference(h, 1, 4, cfg)
    job = Job(h, "ip", 1, 4, cfg, ["--restart-scope=failed", "--max-restarts", "20"])
    since = -1
    for _ in range(5):
        poll("progress", lambda: last_step(job.metrics) > since + 5, 120)
        since = last_step(job.metrics)
        first = job.workers(0)
        a, b = random.sample(first, 2)
        before = job.replacements()
        os.kill(a, signal.SIGKILL)
        poll("the replacement", lambda: job.replacements() > before, 60)
        os.kill(b, signal.SIGKILL)  # during the recovery from the first
        poll("the second replacement", lambda: job.replacements() > before + 1, 60)
        # The next round waits for steps past this one's kills: both replacements have the state.
        since = last_step(job.metrics)
    check(job.wait() == [0], "the job failed:\n" + job.output()[-4000:])
    check(params_crc(job.output()) == want, "parameters differ from the fault-free run")
    check("restarting the job" not in job.output(),
          "two of four processes killed restarted every worker:\n" + job.output()[-4000:])


def all_state_lost(h):
    """Every process that holds the state is killed before a recovery completes: the job cannot
    recover in place; it restarts every worker (generation 1) and finishes."""
    cfg = config(20)
    job = Job(h, "ip", 1, 4, cfg, ["--restart-scope=failed", "--max-restarts", "10"])
    poll("progress", lambda: last_step(job.metrics) > 5, 120)
    for pid in job.workers(0):
        os.kill(pid, signal.SIGKILL)
    check(job.wait() == [0], "the job failed:\n" + job.output()[-4000:])
    out = job.output()
    check("no rank holds the training state" in out and "generation 1" in out,
          "no fallback to a full restart:\n" + out[-4000:])


def lone_worker(h):
    """A one-worker job: a replacement would have no peer to take the state from. It says the state
    is lost and every worker restarts (generation 1), instead of training on from new parameters."""
    cfg = config(3)
    job = Job(h, "ip", 1, 1, cfg, ["--restart-scope=failed", "--max-restarts", "10"])
    poll("progress", lambda: last_step(job.metrics) > 5, 120)
    os.kill(job.workers(0)[0], signal.SIGKILL)
    check(job.wait() == [0], "the job failed:\n" + job.output()[-4000:])
    out = job.output()
    check("alone in its world has no peer to take the training state from" in out and
          "generation 1" in out, "no fallback to a full restart:\n" + out[-4000:])


def replacement_crash(h):
    cfg = config(20)
    want = reference(h, 1, 4, cfg)
    marker = os.path.join(TMP, "crashed-once")
    if os.path.exists(marker):
        os.unlink(marker)
    script = ('if [ "$DDP_STATE_FROM_PEER" = 1 ] && [ ! -e %s ]; then : > %s; exit 7; fi; '
              'exec %s --config %s --metrics %s' %
              (marker, marker, TRAIN, cfg, os.path.join(TMP, "ip.metrics.jsonl")))
    # No standby: this is about a new process that fails as it starts (a standby is the same
    # program, started long before; `standby` covers one that dies while it waits).
    job = Job(h, "ip", 1, 4, cfg, ["--restart-scope=failed", "--max-restarts", "5",
                                   "--standby-workers", "0"], command=["sh", "-c", script])
    poll("progress", lambda: last_step(job.metrics) > 10, 120)
    os.kill(random.choice(job.workers(0)), signal.SIGKILL)
    check(job.wait() == [0], "the job failed:\n" + job.output()[-4000:])
    check(os.path.exists(marker), "no replacement ran")
    # The kill and the crashed replacement, nothing else: a survivor whose Gloo connect belongs to
    # the quorum the crash superseded abandons it in its own process (docs/recovery.md).
    check(job.replacements("SIGKILL") == 1 and job.replacements("exited with 7") == 1 and
          job.replacements() == 2,
          "%d replacements (want the kill and the crashed replacement):\n%s"
          % (job.replacements(), job.output()[-3000:]))
    check(params_crc(job.output()) == want, "parameters differ from the fault-free run")


def standby(h):
    """A standby process killed while it waits is logged and started again; the next worker killed
    is replaced by that new standby; the job ends bit-identical, with no full restart."""
    cfg = config(40)
    want = reference(h, 1, 4, cfg)
    job = Job(h, "ip", 1, 4, cfg, ["--restart-scope=failed", "--max-restarts", "10"])
    poll("a standby process", lambda: len(job.standbys()) == 1, 120)
    first = job.standbys()[0]
    check(first not in job.workers(), "the standby counts as a worker")
    os.kill(first, signal.SIGKILL)
    poll("a new standby", lambda: job.standbys() not in ([], [first]), 60)
    second = job.standbys()[0]
    check("standby process %d was killed by SIGKILL before it was needed" % first in job.output(),
          "no line for the standby that died:\n" + job.output()[-3000:])
    since = last_step(job.metrics)
    poll("progress", lambda: last_step(job.metrics) > since + 5, 120)
    victim = random.choice(job.workers())
    os.kill(victim, signal.SIGKILL)
    poll("the replacement", lambda: job.replacements() == 1, 60)
    poll("the standby's hand-over",
         lambda: "standby process %d takes the place" % second in job.output(), 60)
    check(second in job.workers() and victim not in job.workers(),
          "the standby is not one of the workers now")
    check(job.wait() == [0], "the job failed:\n" + job.output()[-4000:])
    check(params_crc(job.output()) == want, "parameters differ from the fault-free run")
    check("restarting the job" not in job.output(), "a full restart:\n" + job.output()[-4000:])


def standby_agent_kill(h):
    """kill -9 of an agent whose standby waits leaves no standby directory, FIFO or process."""
    tmpdir = os.path.join(TMP, "agent_kill_tmp")
    os.makedirs(tmpdir, exist_ok=True)
    for stale in glob.glob(os.path.join(tmpdir, "ddprun-standby-*")):
        for f in os.listdir(stale):
            os.unlink(os.path.join(stale, f))
        os.rmdir(stale)

    def standby_dirs():
        return glob.glob(os.path.join(tmpdir, "ddprun-standby-*"))
    job = Job(h, "ak", 1, 2, config(400), ["--restart-scope=failed", "--standby-workers=1"],
              env=dict(os.environ, TMPDIR=tmpdir))
    standby = poll("a standby process", lambda: job.standbys(), 120)[0]
    fifos = poll("the standby's FIFO", lambda: [f for d in standby_dirs()
                                                for f in glob.glob(os.path.join(d, "*"))], 30)
    agent = job.agents[0]
    os.kill(agent.pid, signal.SIGKILL)
    agent.wait(timeout=30)
    poll("the standby's end", lambda: not os.path.exists("/proc/%d" % standby) or
         open("/proc/%d/stat" % standby).read().split(") ")[1][0] == "Z", 30)
    poll("the standby directory's removal (%s)" % fifos, lambda: not standby_dirs(), 30)


def metrics_lines(h, kills):
    """In-place kills: one metrics line per step done, none missing, none twice."""
    cfg = train_config(20000, 32, 4, shards=4, hidden=(64, 64), epochs=80, batch_size=64,
                       log_every=1, optimizer="adamw", lr=0.002, check_params_every=50)
    job = Job(h, "ml", 1, 4, cfg, ["--restart-scope=failed", "--max-restarts", str(kills + 10)])
    poll("the first metrics", lambda: last_step(job.metrics) >= 0, 120)
    kill_loop(h, job, kills, lambda i: job.workers(0), steps=78 * 80)
    check(job.wait() == [0], "the job failed:\n" + job.output()[-4000:])
    check("restarting the job" not in job.output(), "a kill restarted every worker")
    steps = [line["step"] for line in json_lines(job.metrics)]
    done = steps_of(job.output())
    missing = sorted(set(range(1, done + 1)) - set(steps))
    twice = sorted(s for s in set(steps) if steps.count(s) > 1)
    check(not missing and not twice and len(steps) == done,
          "%d lines for %d steps; missing %s; twice %s" %
          (len(steps), done, missing[:20], twice[:20]))
    h.log("%d kills: %d metrics lines for %d steps, one each" % (kills, len(steps), done))


def budget(h):
    cfg = config(40)
    job = Job(h, "ip", 1, 4, cfg, ["--restart-scope=failed", "--max-restarts", "1"])
    poll("progress", lambda: last_step(job.metrics) > 5, 120)
    os.kill(random.choice(job.workers(0)), signal.SIGKILL)
    poll("the replacement", lambda: job.replacements() == 1, 60)
    since = last_step(job.metrics)
    poll("progress after the replacement", lambda: last_step(job.metrics) > since + 5, 120)
    victim = random.choice(job.workers(0))
    os.kill(victim, signal.SIGKILL)
    code = job.wait()[0]
    out = job.output()
    check(code == 128 + signal.SIGKILL, "exit %d, want %d:\n%s" % (code, 128 + 9, out[-3000:]))
    summary = failure_summary(out)
    check("pid: %d" % victim in root_cause(summary), "root cause is not pid %d:\n%s" % (victim, summary))
    check("Recovered in place (1;" in summary, "the first kill is not listed:\n" + summary)
    check("budget" in out and job.replacements() == 1, "the second kill was replaced")


def hopeless(h, verdict):
    """Replacements that fail at start the same way (a bad data path on this node only): the agent
    backs off between them (250, 500, 1000 ms, ...); with --verdict-after=3 the third failure in a
    row stops the job (exit 87, the verdict naming the replacements) with most of a 100-restart
    budget left; without a verdict the budget is spent and the exit code is the root cause's."""
    tag = "hv" if verdict else "hb"
    metrics = os.path.join(TMP, tag + ".metrics.jsonl")
    wrapper = ('if [ "$DDP_STATE_FROM_PEER" = 1 ]; then echo "cannot open /data/shard-3" >&2; '
               'exit 2; fi; exec "$0" "$@"')
    flags = ["--restart-scope=failed", "--standby-workers=0",
             "--max-restarts", "100" if verdict else "4"] + (["--verdict-after=3"] if verdict else [])
    job = Job(h, tag, 1, 2, None, flags,
              command=["sh", "-c", wrapper, TRAIN, "--config", config(40), "--metrics", metrics])
    job.metrics = metrics
    poll("progress", lambda: last_step(metrics) > 5, 120)
    os.kill(job.workers(0)[0], signal.SIGKILL)
    codes = job.wait()
    out = job.output()
    waits = [int(ms) for ms in re.findall(r"waiting (\d+) ms before the next one", out)]
    if verdict:
        check(codes == [87], "want exit 87 from the verdict, have %s:\n%s" % (codes, out[-3000:]))
        check(re.search(r"the same failure 3 times in a row \(2 of them replaced in place\)", out),
              "no verdict naming the replacements:\n" + out[-3000:])
        check(job.replacements() == 3, "want 3 replacements (1 kill, 2 failed at start), have %d"
              % job.replacements())
        check(waits == [250, 500], "back-offs %s, want [250, 500]" % waits)
    else:
        check(codes == [2], "want the root cause's exit 2, have %s:\n%s" % (codes, out[-3000:]))
        check(waits == [250, 500, 1000, 2000], "back-offs %s, want [250, 500, 1000, 2000]" % waits)
        check("budget" in out, "the budget was not spent:\n" + out[-3000:])


def joined_kills(h, kills):
    """Each replacement killed as soon as it joined and the job stepped on (seconds apart, as in a
    storm): none failed at start, so none is followed by a back-off; bit-identical."""
    cfg = config(40)
    want = reference(h, 1, 4, cfg)
    job = Job(h, "ip", 1, 4, cfg, ["--restart-scope=failed", "--max-restarts", str(kills + 2)])
    poll("progress", lambda: last_step(job.metrics) > 5, 120)
    victim = random.choice(job.workers(0))
    for i in range(kills):
        before = set(job.workers(0))
        os.kill(victim, signal.SIGKILL)
        new = poll("replacement %d" % (i + 1), lambda: sorted(set(job.workers(0)) - before), 60)
        since = last_step(job.metrics)
        poll("progress after replacement %d" % (i + 1),
             lambda: last_step(job.metrics) > since + 5, 120, interval=0.005)
        victim = new[0]  # the same local rank's next process
    check(job.wait() == [0], "the job failed:\n" + job.output()[-4000:])
    out = job.output()
    waits = re.findall(r"a replacement failed at start again; waiting \d+ ms", out)
    check(not waits, "a replacement that joined was taken as failed at start: %s" % waits)
    check(job.replacements() == kills, "%d replacements, want %d" % (job.replacements(), kills))
    check(params_crc(out) == want, "parameters differ from the fault-free run")


def not_capable(h):
    script = os.path.join(TMP, "plain_worker.py")
    with open(script, "w") as f:
        f.write("import os, sys, time\n"
                "go = os.path.join(%r, 'gen%%s' %% os.environ['TORCHELASTIC_RESTART_COUNT'])\n"
                "open(go + '.' + os.environ['RANK'], 'w').close()\n"
                "time.sleep(0 if os.environ['TORCHELASTIC_RESTART_COUNT'] != '0' else 600)\n" % TMP)
    job = Job(h, "nc", 1, 2, None, ["--restart-scope=failed", "--max-restarts", "1"],
              command=[script])
    poll("both workers", lambda: len(job.workers(0, "python3")) == 2, 60)
    os.kill(job.workers(0, "python3")[0], signal.SIGKILL)
    check(job.wait() == [0], "the job failed:\n" + job.output()[-3000:])
    out = job.output()
    check("restart scope failed, but 0 of 2 workers recover in place" in out,
          "no line saying why every worker restarts:\n" + out[-3000:])
    check(os.path.exists(os.path.join(TMP, "gen1.0")) and os.path.exists(os.path.join(TMP, "gen1.1")),
          "generation 1 did not run both workers")


def donor_killed(h, kills):
    cfg = config(60)
    want = reference(h, 1, 4, cfg)
    job = Job(h, "ip", 1, 4, cfg, ["--restart-scope=failed", "--max-restarts", str(3 * kills)])
    # "[...] [trainer] [host:<pid> rank R] rank R hands its state ...": the donor's pid.
    hand_over = re.compile(r"\[[^\]\s]+:(\d+) rank \d+\] rank \d+ hands its state")
    poll("the first metrics", lambda: last_step(job.metrics) >= 0, 120)
    killed = []
    for _ in range(kills):
        since = last_step(job.metrics)
        poll("progress", lambda: last_step(job.metrics) > since + 5, 120)
        seen = len(hand_over.findall(job.output()))
        victim = random.choice(job.workers(0))
        os.kill(victim, signal.SIGKILL)
        # Polled every millisecond: the donor sends for a few milliseconds only.
        donors = poll("the donor's hand-over", lambda: hand_over.findall(job.output())[seen:],
                      60, interval=0.001)
        donor = int(donors[0])
        check(donor in job.workers(0) or not alive(donor),
              "pid %d named as the donor is not a worker of the job" % donor)
        if alive(donor):
            os.kill(donor, signal.SIGKILL)
        killed += [victim, donor]
    kept = set(job.workers(0)) - set(killed)
    check(job.wait() == [0], "the job failed:\n" + job.output()[-4000:])
    out = job.output()
    check("exiting so that the agent replaces" not in out, "a rank left its process:\n" +
          out[-4000:])
    # A donor killed before its agent published the first kill's replacement is replaced in the
    # same quorum (one line for both).
    check(kills <= job.replacements() <= 2 * kills, "%d replacements for %d kills" %
          (job.replacements(), 2 * kills))
    check("restarting the job" not in out, "a kill restarted every worker")
    check(params_crc(out) == want, "parameters differ from the fault-free run")
    h.log("%d donors killed while they sent; %d survivors kept" % (kills, len(kept)))


def sigstop(h):
    cfg = config(40)
    want = reference(h, 1, 4, cfg)
    job = Job(h, "ip", 1, 4, cfg, ["--restart-scope=failed", "--max-restarts", "3"])
    poll("progress", lambda: last_step(job.metrics) > 10, 120)
    before = sorted(job.workers(0))
    frozen = random.choice(before)
    os.kill(frozen, signal.SIGSTOP)
    stopped_at = last_step(job.metrics)
    time.sleep(5)  # the fault itself: frozen for 5 s
    check(last_step(job.metrics) <= stopped_at + 5, "the job stepped on without the frozen rank")
    os.kill(frozen, signal.SIGCONT)
    poll("progress after the stop", lambda: last_step(job.metrics) > stopped_at + 10, 120)
    check(sorted(job.workers(0)) == before, "a worker was replaced: %s -> %s" %
          (before, sorted(job.workers(0))))
    check(job.wait() == [0], "the job failed:\n" + job.output()[-4000:])
    check(job.replacements() == 0, "%d replacements" % job.replacements())
    check(params_crc(job.output()) == want, "parameters differ from the fault-free run")


def run(scenarios):
    """Runs the scenario argv[1] names (`scenarios`: name -> function(harness, *argv[2:])) with
    random seeded by this pid (multinode_harness.run_scenario). Returns the exit code."""
    random.seed(os.getpid())
    return run_scenario(sys.argv, scenarios)


def main():
    def kills(args, default):
        return int(args[0]) if args else default
    return run({
        "kills_1x4": lambda h, *a: bit_identical(h, 1, 4, kills(a, 100),
                                                epochs=max(24, kills(a, 100) * 12 // 5)),
        "kills_2x2": lambda h, *a: bit_identical(h, 2, 2, kills(a, 20), epochs=80),
        "second_failure": lambda h, *a: second_failure(h),
        "all_state_lost": lambda h, *a: all_state_lost(h),
        "lone_worker": lambda h, *a: lone_worker(h),
        "replacement_crash": lambda h, *a: replacement_crash(h),
        "standby": lambda h, *a: standby(h),
        "standby_agent_kill": lambda h, *a: standby_agent_kill(h),
        "metrics_lines": lambda h, *a: metrics_lines(h, kills(a, 30)),
        "budget": lambda h, *a: budget(h),
        "not_capable": lambda h, *a: not_capable(h),
        "donor_killed": lambda h, *a: donor_killed(h, kills(a, 5)),
        "hopeless_verdict": lambda h, *a: hopeless(h, verdict=True),
        "hopeless_budget": lambda h, *a: hopeless(h, verdict=False),
        "sigstop": lambda h, *a: sigstop(h),
        "joined_kills": lambda h, *a: joined_kills(h, kills(a, 4)),
    })


if __name__ == "__main__":
    sys.exit(main())
