"""PyTorch DDP scripts recovering in place (issue 32): real ddprun agents running
torch_in_place_worker.py (ddprun.torch, torch 1.13, Gloo on the CPU) with --restart-scope=failed.

  torch_in_place_test.py SCENARIO [KILLS]

  kills_1x4          one node, 4 workers: KILLS (default 8; the slow entry 100) random worker
                     SIGKILLs, each once the job stepped on: every kill replaced in place, no full
                     restart, the survivors keep their pids, parameters and optimizer state
                     bit-identical to the fault-free run
  kills_2x2          two agents of 2 workers on one ddprund, KILLS (default 6) SIGKILLs alternating
                     between the nodes: the same checks
  wide_kills         kills_1x4 with KILLS (default 4) on a model of 4.3 M parameters: a kill cuts a
                     survivor's gradient message in the middle, which torch's Gloo never wakes
                     from; the survivor gives that collective up and keeps its process
  second_failure     three times two workers SIGKILLed back to back (the second during the first's
                     recovery): bit-identical, the never-killed workers keep their pids
  replacement_crash  the first replacement exits 7 before init_process_group (--standby-workers 0):
                     it is replaced in turn; bit-identical
  donor_killed       KILLS (default 2) times a worker is SIGKILLed, then the donor of the state as it
                     sends (after the size, before the state): bit-identical, no full restart
  two_nodes          2x2: a worker on each node SIGKILLed at once: bit-identical, pids kept
  sigstop            a worker SIGSTOPped 5 s, then continued: it carries on in place, nothing is
                     replaced; bit-identical
  blocked            a worker SIGSTOPped, then another SIGKILLed: the ranks blocked on the frozen one
                     in a collective of the superseded quorum let go of it while it is still frozen
                     (the new quorum outlives the collective); continued, the job ends bit-identical
  node_loss          2x2 with nnodes 1:2: node 1's agent SIGKILLed; node 0's workers keep their pids
                     and go on at world 2; a new agent grows the world back to 4
  bad_nothing, bad_sampler_only, bad_no_state_dict, bad_steps_twice, bad_nccl, bad_find_unused
                     a script that registers nothing / an object without state_dict / calls
                     g.steps twice / asks for NCCL on this CPU box: the job fails at once with one
                     line naming the cause
  plain              a script without ddprun.torch: a kill restarts every worker, with the agent's
                     one-line note
  torchrun           the same script under torchrun 1.13: plain torch.distributed, and the same
                     bits as under ddprun --restart-scope=all

Every run is also checked from the step logs the workers write: one world (never two processes
for one rank of a quorum, a quorum never stepping on behind its successor), every sample of each
epoch exactly once over the committed steps, and no process left running after the job. Every
process started here is stopped by pid.
"""
import fcntl
import glob
import hashlib
import os
import random
import re
import signal
import subprocess
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from multinode_harness import (BIN, PY, SRC, TMP, TestFailure, alive, c10d,  # noqa: E402
                               check, poll, run_scenario, workers)

WORKER = os.path.join(SRC, "tests", "integration", "torch_in_place_worker.py")
PACKAGE = os.path.join(SRC, "worker_runtime", "python")
SAMPLES, BATCH = 2048, 16
IN_PLACE = ["--restart-scope=failed"]


def job_env():
    env = dict(os.environ, PYTHON_EXEC=PY, DDP_NO_SLURM="1")
    env["PYTHONPATH"] = PACKAGE + (":" + env["PYTHONPATH"] if env.get("PYTHONPATH") else "")
    return env


class StepLog:
    """The workers' step lines (torch_in_place_worker.py's docstring), read incrementally."""

    def __init__(self, out):
        self.out, self.offsets, self.entries, self.top = out, {}, [], 0

    def poll(self):
        for path in glob.glob(os.path.join(self.out, "steps.*.log")):
            with open(path, "rb") as f:
                f.seek(self.offsets.get(path, 0))
                text = f.read()
            complete = text[:text.rfind(b"\n") + 1]
            self.offsets[path] = self.offsets.get(path, 0) + len(complete)
            for line in complete.decode().splitlines():
                g, q, step, epoch, world, rank, pid, idx = line.split()
                e = (int(g), int(q), int(step), int(epoch), int(world), int(rank), int(pid),
                     tuple(int(i) for i in idx.split(",")))
                self.entries.append(e)
                self.top = max(self.top, e[2])
        return self.top

    def pids(self):
        return {int(os.path.basename(p).split(".")[1])
                for p in glob.glob(os.path.join(self.out, "steps.*.log"))}


class Job:
    """`nodes` agents of `nproc` torch_in_place_worker.py processes (one agent: --standalone)."""

    def __init__(self, h, tag, nodes, nproc, flags=(), steps=300, mode="train", env=None,
                 nnodes=None, sleep=0.0, wide=0):
        self.h, self.tag, self.nproc, self.steps = h, tag, nproc, steps
        self.out = os.path.join(TMP, tag + ".out")
        os.makedirs(self.out, exist_ok=True)
        for f in glob.glob(os.path.join(self.out, "*")):
            os.unlink(f)
        self.cmd = [WORKER, "--out", self.out, "--steps", str(steps), "--samples", str(SAMPLES),
                    "--batch", str(BATCH), "--mode", mode] + (["--sleep", str(sleep)] if sleep else []) + \
            (["--wide", str(wide)] if wide else [])
        self.env = dict(job_env(), **(env or {}))
        self.flags = ["--shutdown-timeout", "5"] + list(flags)
        self.nnodes = nnodes or nodes
        self.agents, self.names, self.lost = [], [], []
        self.log = StepLog(self.out)
        for n in range(nodes):
            self.add_agent(["--node-rank", str(n)] if nodes > 1 and n == 0 else [])

    def add_agent(self, extra=()):
        name = "%s%d" % (self.tag, len(self.names) + len(self.lost))
        if self.nnodes == 1:
            argv = [os.path.join(BIN, "ddprun"), "--standalone", "--nproc-per-node", str(self.nproc)]
        else:
            if not hasattr(self.h, "rdzv_port"):
                self.h.rdzv_port = self.h.ddprund()
            argv = [os.path.join(BIN, "ddprun")] + c10d(self.h.rdzv_port, self.nnodes, self.nproc,
                                                        run_id=self.tag) + list(extra)
        p = self.h.spawn(name, argv + self.flags + self.cmd, self.env)
        self.agents.append(p)
        self.names.append(name)
        return p

    def output(self):
        return "".join(self.h.output(n) for n in self.names + self.lost)

    def lose(self, node):
        """Agent `node` is killed on purpose: the job goes on without it."""
        p = self.agents.pop(node)
        self.lost.append(self.names.pop(node))
        return p

    def workers(self, node=0):
        return workers(self.agents[node].pid, "python3", log=self.output())

    def step(self):
        return self.log.poll()

    def wait(self, stall=120):
        """Every agent's exit code, waiting as long as the job steps on (no step in `stall` s fails
        the test: a hang)."""
        codes = []
        for p, name in zip(self.agents, self.names):
            seen, at = self.step(), time.monotonic()
            while True:
                try:
                    codes.append(p.wait(timeout=1))
                    break
                except subprocess.TimeoutExpired:
                    pass
                if self.step() != seen:
                    seen, at = self.step(), time.monotonic()
                elif time.monotonic() - at > stall:
                    raise TestFailure("%s (pid %d) made no step in %d s (last step %d): a hang\n%s"
                                      % (name, p.pid, stall, seen, self.output()[-4000:]))
        return codes

    def replacements(self, cause=""):
        return len(re.findall(r"%s[^\n]*; replacing in place \(quorum" % re.escape(cause),
                              self.output()))

    def finals(self):
        """{rank: (pid, step, params crc, optim crc)} of the ranks that finished."""
        out = {}
        for path in glob.glob(os.path.join(self.out, "final.*")):
            m = re.match(r"pid (\d+) step (\d+) params (\w+) optim (\w+)", open(path).read())
            check(m, "bad final line in %s" % path)
            out[int(path.rsplit(".", 1)[1])] = (int(m.group(1)), int(m.group(2)), m.group(3), m.group(4))
        return out

    def result(self, world):
        """The (params, optim) CRCs every rank 0..world-1 ended with (one value: fails otherwise)."""
        finals = self.finals()
        check(sorted(finals) == list(range(world)), "final lines of ranks %s, want 0..%d:\n%s"
              % (sorted(finals), world - 1, self.output()[-3000:]))
        crcs = {f[2:] for f in finals.values()}
        check(len(crcs) == 1, "ranks ended with different states: %s" % finals)
        check(all(f[1] == self.steps for f in finals.values()), "a rank stopped short: %s" % finals)
        return crcs.pop()


# -- checks from the step logs -------------------------------------------------------------------
def committed(entries):
    """{step: [entries]} of the attempt of each step that counted: the newest (generation, quorum)
    that ran it (an attempt that failed is run again in a newer quorum, or from step 1 after a full
    restart)."""
    latest = {}
    for e in entries:
        key = (e[0], e[1])
        if e[2] not in latest or key > latest[e[2]][0]:
            latest[e[2]] = (key, [])
        if key == latest[e[2]][0]:
            latest[e[2]][1].append(e)
    return {s: v[1] for s, v in latest.items()}


def check_one_world(entries):
    """Never two worlds: one process per rank of a quorum and step, the ranks of a committed step
    are exactly 0..world-1, and within a generation a quorum never steps on past the first step of
    its successor (but the one step that only lost ranks committed)."""
    seen = {}
    for e in entries:
        key = (e[0], e[1], e[2], e[5])
        check(seen.setdefault(key, e[6]) == e[6], "two processes (%d, %d) ran rank %d of quorum "
              "%d.%d at step %d" % (seen[key], e[6], e[5], e[0], e[1], e[2]))
    for step, es in committed(entries).items():
        worlds = {e[4] for e in es}
        check(len(worlds) == 1 and sorted(e[5] for e in es) == list(range(worlds.pop())),
              "step %d ran by ranks %s with worlds %s" % (step, sorted(e[5] for e in es),
                                                         sorted({e[4] for e in es})))
    spans = {}
    for e in entries:
        lo, hi = spans.get((e[0], e[1]), (e[2], e[2]))
        spans[(e[0], e[1])] = (min(lo, e[2]), max(hi, e[2]))
    # A quorum's last logged step is one it began; its successor begins after the newest step a
    # surviving rank committed. A rank can commit a step whose allreduce its peers failed (it had
    # every byte it needed before the peer died); when it is lost too (the donor killed
    # mid-transfer), that step is redone: the successor then begins one step below.
    ids = sorted(spans)
    for a, b in zip(ids, ids[1:]):
        if a[0] == b[0]:
            check(spans[a][1] <= spans[b][0] + 1, "quorum %d.%d ran steps %s, its successor %d.%d "
                  "%s: two worlds" % (a + (spans[a],) + b + (spans[b],)))


def check_samples(entries, steps):
    """Every sample of each epoch exactly once over the committed steps (the last epoch may end
    early), whatever the world sizes; returns the world sizes the steps ran with."""
    by_step = committed(entries)
    check(sorted(by_step) == list(range(1, steps + 1)),
          "steps run: %d of %d" % (len(by_step), steps))
    epochs = {}
    for step in sorted(by_step):
        for e in by_step[step]:
            epochs.setdefault(e[3], []).extend(e[7])
    last = max(epochs)
    for epoch, idx in sorted(epochs.items()):
        twice = len(idx) - len(set(idx))
        check(twice == 0, "epoch %d: %d samples repeated" % (epoch, twice))
        check(epoch == last or len(idx) == SAMPLES, "epoch %d: %d of %d samples (skipped %s...)"
              % (epoch, len(idx), SAMPLES, sorted(set(range(SAMPLES)) - set(idx))[:10]))
    return [by_step[s][0][4] for s in sorted(by_step)]


def check_no_orphans(job):
    """No process of the job is left once its agents exited: every worker and standby (each one
    opened a step log) is gone."""
    pids = job.log.pids()
    left = poll("every worker's end", lambda: not [p for p in pids if alive(p)] or None, 15) \
        if any(alive(p) for p in pids) else None
    check(left is None or not [p for p in pids if alive(p)], "processes left running: %s"
          % [p for p in pids if alive(p)])


def check_job(job, want=None, world=None, restarts_ok=False):
    """The common end checks of a job that completed; returns the world sizes per step."""
    world = world or job.nproc * len(job.agents)
    job.step()
    got = job.result(world)
    if want is not None:
        check(got == want, "parameters/optimizer %s differ from the fault-free run's %s" % (got, want))
    if not restarts_ok:
        check("restarting the job" not in job.output() and
              "stopping the other workers" not in job.output(),
              "a full restart:\n" + job.output()[-4000:])
    check_one_world(job.log.entries)
    worlds = check_samples(job.log.entries, job.steps)
    check_no_orphans(job)
    return worlds


def reference(h, nodes, nproc, steps, wide=0):
    """The fault-free run's (params, optim) CRCs, computed once per layout and length for every
    scenario (cached beside the tests' scratch dirs, keyed by the worker's and the package's
    sources)."""
    digest = hashlib.sha256()
    for path in [WORKER] + sorted(glob.glob(os.path.join(PACKAGE, "ddprun", "**", "*.py"),
                                            recursive=True)):
        digest.update(open(path, "rb").read())
    key = "%dx%d-%d%s-%s" % (nodes, nproc, steps, "-w%d" % wide if wide else "", digest.hexdigest()[:16])
    cache = os.path.join(os.path.dirname(TMP), "torch_in_place_reference")
    os.makedirs(cache, exist_ok=True)
    path = os.path.join(cache, key)
    with open(path + ".lock", "a") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        if os.path.exists(path):
            return tuple(open(path).read().split())
        job = Job(h, "ref", nodes, nproc, IN_PLACE, steps=steps, wide=wide)
        check(job.wait() == [0] * nodes, "the fault-free job failed:\n" + job.output()[-3000:])
        check_job(job)
        want = job.result(nodes * nproc)
        with open(path + ".tmp", "w") as f:
            f.write(" ".join(want))
        os.rename(path + ".tmp", path)
        h.log("fault-free %dx%d, %d steps: params %s optim %s" % ((nodes, nproc, steps) + want))
        return want


def progress(job, since, what, n=5, timeout=120):
    poll("%s (step > %d)" % (what, since + n),
         lambda: job.step() > since + n or any(p.poll() is not None for p in job.agents),
         timeout, interval=0.005)
    check(all(p.poll() is None for p in job.agents),
          "the job ended while waiting for %s:\n%s" % (what, job.output()[-3000:]))
    return job.step()


def kill(job, pids):
    """SIGKILLs `pids`; the step read after the kills, for the next wait for progress to count from.
    Read before them, it may be old by the time they land (finding the workers reads /proc, which
    takes a while on a busy machine), and the next wait could end at once: kills meant to be
    rounds apart would land together (every original worker at once: a full restart)."""
    for p in pids:
        os.kill(p, signal.SIGKILL)
    return job.step()


def original_pids(job):
    """The workers of every node once each of them stepped."""
    poll("the first steps", lambda: job.step() >= 2, 180)
    return {n: sorted(job.workers(n)) for n in range(len(job.agents))}


def check_kept(job, before, killed):
    """Every process never killed finished as a worker of the job (its pid kept)."""
    final_pids = {f[0] for f in job.finals().values()}
    kept = {p for ps in before.values() for p in ps} - set(killed)
    check(kept <= final_pids, "survivors %s lost their process (finished: %s)"
          % (sorted(kept - final_pids), sorted(final_pids)))


# -- scenarios -----------------------------------------------------------------------------------
def kills(h, nodes, nproc, count, steps, wide=0):
    want = reference(h, nodes, nproc, steps, wide)
    job = Job(h, "ip", nodes, nproc, IN_PLACE + ["--max-restarts", str(count + 10)], steps=steps,
              wide=wide)
    before = original_pids(job)
    killed, since = [], job.step()
    for i in range(count):
        since = progress(job, since, "progress after kill %d" % i)
        check(since < steps * 0.9, "the job neared its end (step %d of %d) after %d of %d kills"
              % (since, steps, i, count))
        victim = random.choice([w for w in job.workers(i % nodes) if w not in killed])
        since = kill(job, [victim])
        killed.append(victim)
        h.log("kill %d: pid %d at step %d" % (i, victim, since))
    h.log("%d workers killed" % count)
    check(job.wait() == [0] * nodes, "the job failed:\n" + job.output()[-4000:])
    check(job.replacements("killed by SIGKILL") == count, "%d replacements for %d kills"
          % (job.replacements("killed by SIGKILL"), count))
    check_job(job, want)
    check({e[0] for e in job.log.entries} == {0}, "steps ran in generations %s (a restart)"
          % sorted({e[0] for e in job.log.entries}))
    check_kept(job, before, killed)
    h.log("bit-identical after %d kills: params %s optim %s" % ((count,) + want))


def second_failure(h, rounds=3):
    """Two workers SIGKILLed back to back (the second while the first one's recovery runs), three
    times: the survivors' half-built group of the superseded quorum must not leave them under
    another group name than the replacements' (torch counts its groups)."""
    steps = 600
    want = reference(h, 1, 4, steps)
    job = Job(h, "ip", 1, 4, IN_PLACE + ["--max-restarts", "20"], steps=steps)
    before = original_pids(job)
    killed, since = [], job.step()
    for i in range(rounds):
        since = progress(job, since, "progress before round %d" % i, n=10)
        pair = random.sample(job.workers(), 2)
        since = kill(job, pair)
        killed += pair
        h.log("round %d: killed %s at step %d" % (i, pair, since))
    check(job.wait() == [0], "the job failed:\n" + job.output()[-4000:])
    check(job.replacements("killed by SIGKILL") == 2 * rounds, "%d replacements for %d kills"
          % (job.replacements("killed by SIGKILL"), 2 * rounds))
    check_job(job, want)
    check_kept(job, before, killed)


def replacement_crash(h):
    steps = 300
    want = reference(h, 1, 4, steps)
    marker = os.path.join(TMP, "crashed-once")
    if os.path.exists(marker):
        os.unlink(marker)
    job = Job(h, "ip", 1, 4, IN_PLACE + ["--max-restarts", "5", "--standby-workers", "0"],
              steps=steps, env={"TIP_CRASH_MARKER": marker})
    before = original_pids(job)
    since = progress(job, job.step(), "progress")
    victim = random.choice(job.workers())
    os.kill(victim, signal.SIGKILL)
    check(job.wait() == [0], "the job failed:\n" + job.output()[-4000:])
    check(os.path.exists(marker), "no replacement ran")
    check(job.replacements("SIGKILL") == 1 and job.replacements("exited with 7") == 1,
          "want the kill and the crashed replacement replaced in place, have %d:\n%s"
          % (job.replacements(), job.output()[-3000:]))
    check_job(job, want)
    check_kept(job, before, [victim])
    h.log("killed at step %d; the crashed replacement replaced in turn" % since)


def donor_killed(h, count):
    steps = 400
    want = reference(h, 1, 4, steps)
    arm = os.path.join(TMP, "donor.arm")
    job = Job(h, "ip", 1, 4, IN_PLACE + ["--max-restarts", str(3 * count + 5)], steps=steps,
              env={"TIP_DONOR_ARM": arm})
    before = original_pids(job)
    donor_log = os.path.join(job.out, "donor.log")
    killed, since = [], job.step()
    for i in range(count):
        since = progress(job, since, "progress before kill %d" % i)
        open(arm, "w").close()
        victim = random.choice([w for w in job.workers() if w not in killed])
        os.kill(victim, signal.SIGKILL)
        killed.append(victim)
        donor = poll("the donor stopped mid-transfer", lambda: os.path.exists(donor_log) and
                     [int(l) for l in open(donor_log).read().split()][i:], 120)[0]
        check(donor in job.workers(), "donor pid %d is not a worker" % donor)
        since = kill(job, [donor])
        killed.append(donor)
        h.log("killed %d, then its donor %d mid-transfer" % (victim, donor))
    check(job.wait() == [0], "the job failed:\n" + job.output()[-4000:])
    check_job(job, want)
    check_kept(job, before, killed)


def two_nodes(h):
    steps = 400
    want = reference(h, 2, 2, steps)
    job = Job(h, "ip", 2, 2, IN_PLACE + ["--max-restarts", "10"], steps=steps)
    before = original_pids(job)
    progress(job, job.step(), "progress")
    victims = [random.choice(job.workers(0)), random.choice(job.workers(1))]
    for v in victims:
        os.kill(v, signal.SIGKILL)
    check(job.wait() == [0, 0], "the job failed:\n" + job.output()[-4000:])
    check(job.replacements("SIGKILL") == 2, "%d replacements for 2 kills" % job.replacements())
    check_job(job, want)
    check_kept(job, before, victims)


def sigstop(h):
    steps = 400
    want = reference(h, 1, 4, steps)
    job = Job(h, "ip", 1, 4, IN_PLACE + ["--max-restarts", "3"], steps=steps)
    before = original_pids(job)
    progress(job, job.step(), "progress")
    frozen = random.choice(before[0])
    os.kill(frozen, signal.SIGSTOP)
    stopped_at = job.step()
    time.sleep(5)  # the fault itself: frozen for 5 s
    check(job.step() <= stopped_at + 1, "the job stepped on without the frozen rank")
    os.kill(frozen, signal.SIGCONT)
    progress(job, stopped_at, "progress after the stop", n=10)
    check(job.wait() == [0], "the job failed:\n" + job.output()[-4000:])
    check(job.replacements() == 0, "%d replacements" % job.replacements())
    check_job(job, want)
    check_kept(job, before, [])


def blocked(h):
    steps = 400
    want = reference(h, 1, 4, steps)
    job = Job(h, "ip", 1, 4, IN_PLACE + ["--max-restarts", "3"], steps=steps,
              )
    before = original_pids(job)
    progress(job, job.step(), "progress")
    frozen, victim = random.sample(before[0], 2)
    others = set(before[0]) - {frozen, victim}
    trace = os.path.join(job.out, "trace.log")

    def closed():
        try:
            return {int(l.split()[0]) for l in open(trace).read().splitlines() if " close " in l}
        except FileNotFoundError:
            return set()
    os.kill(frozen, signal.SIGSTOP)
    try:
        os.kill(victim, signal.SIGKILL)
        # Each survivor was blocked on the frozen rank or on the killed one: it lets go of the
        # superseded quorum's collective while the frozen rank is still stopped.
        # A standby just started can pass for a worker in the process list (its environment read
        # as it execs): the agent's log names every standby it started.
        def standbys():
            return {int(p) for p in re.findall(r"standby process (\d+) started", job.output())}
        poll("the survivors letting go of quorum 0.0 (%s)" % sorted(others),
             lambda: others - standbys() <= closed(), 60)
    finally:
        os.kill(frozen, signal.SIGCONT)
    check(job.wait() == [0], "the job failed:\n" + job.output()[-4000:])
    check(job.replacements("SIGKILL") == 1 and job.replacements() == 1,
          "%d replacements (want the killed worker only)" % job.replacements())
    check_job(job, want)
    check_kept(job, before, [victim])


def node_loss(h):
    steps = 600
    job = Job(h, "nl", 2, 2, IN_PLACE + ["--max-restarts", "3"], steps=steps, nnodes="1:2",
              sleep=0.01)
    before = original_pids(job)
    since = progress(job, job.step(), "progress", n=10)
    lost = job.lose(1)
    os.kill(lost.pid, signal.SIGKILL)
    h.log("killed node 1's agent at step %d" % since)
    poll("the round formed in place", lambda: "formed in place" in h.output("nl0"), 60)
    since = progress(job, since, "progress after the loss", n=10)
    check(sorted(job.workers(0)) == before[0], "node 0's workers were restarted")
    job.add_agent()
    poll("the world grown back", lambda: h.output("nl0").count("formed in place") >= 2, 120)
    progress(job, since, "progress after the growth", n=10)
    check(sorted(job.workers(0)) == before[0], "node 0's workers were restarted")
    check(job.wait() == [0, 0], "the job failed:\n" + job.output()[-4000:])
    check(lost.wait(timeout=10) == -signal.SIGKILL, "node 1's agent: %s" % lost.returncode)
    worlds = check_job(job, world=4)
    check(2 in worlds and worlds[-1] == 4, "world sizes over the run: %s" % sorted(set(worlds)))
    check_kept(job, {0: before[0]}, [])
    h.log("world sizes %s; every sample once per epoch" % sorted(set(worlds)))


BAD = {
    "bad_nothing": ("nothing", r"g\.steps\(\) before g\.state\(\.\.\.\)"),
    "bad_sampler_only": ("sampler_only", r"g\.steps\(\) before g\.state\(\.\.\.\)"),
    "bad_no_state_dict": ("no_state_dict",
                          r"g\.state\(counter=\.\.\.\): an object of type object has no state_dict"),
    "bad_steps_twice": ("steps_twice", r"g\.steps\(\) was called twice"),
    "bad_nccl": ("nccl", r"nccl"),
    "bad_find_unused": ("find_unused", r"find_unused_parameters=True\) does not recover in place"),
}


def bad_input(h, scenario):
    mode, line = BAD[scenario]
    job = Job(h, "bad", 1, 2, IN_PLACE, steps=20, mode=mode)
    try:
        codes = [job.agents[0].wait(timeout=120)]
    except subprocess.TimeoutExpired:
        raise TestFailure("the job still runs after 120 s (a hang):\n" + job.output()[-3000:])
    out = job.output()
    check(codes != [0], "the job succeeded")
    errors = [l for l in out.splitlines() if l.startswith("[default") and re.search(line, l)]
    check(errors, "no line matching %r:\n%s" % (line, out[-3000:]))
    check(not [l for l in out.splitlines() if "File \"" in l and "ddprun/torch" in l],
          "a traceback through ddprun.torch instead of one line:\n" + out[-3000:])
    check_no_orphans(job)
    h.log("one line: %s" % errors[0])


def plain(h):
    job = Job(h, "pl", 1, 2, IN_PLACE + ["--max-restarts", "1"], steps=300, mode="plain")
    poll("progress", lambda: job.step() > 5, 180)
    os.kill(job.workers()[0], signal.SIGKILL)
    check(job.wait() == [0], "the job failed:\n" + job.output()[-3000:])
    check("restart scope failed, but 0 of 2 workers recover in place" in job.output(),
          "no one-line note on the full restart:\n" + job.output()[-3000:])
    check({e[0] for e in job.log.entries} == {0, 1}, "generations %s, want 0 and 1"
          % sorted({e[0] for e in job.log.entries}))
    check_job(job, restarts_ok=True)


def torchrun(h):
    steps = 100
    under_ddprun = Job(h, "all", 1, 2, ["--restart-scope=all"], steps=steps)
    check(under_ddprun.wait() == [0], "ddprun --restart-scope=all failed:\n" +
          under_ddprun.output()[-3000:])
    want = under_ddprun.result(2)
    job = Job.__new__(Job)
    job.h, job.tag, job.nproc, job.steps, job.names, job.lost = h, "tr", 2, steps, ["tr0"], []
    job.out = os.path.join(TMP, "tr.out")
    os.makedirs(job.out, exist_ok=True)
    for f in glob.glob(os.path.join(job.out, "*")):
        os.unlink(f)
    job.log = StepLog(job.out)
    env = job_env()
    env.pop("PYTHON_EXEC")
    job.agents = [h.spawn("tr0", [PY, "-m", "torch.distributed.run", "--redirects=1", "--tee=1",
                                  "--standalone", "--nproc_per_node=2", WORKER, "--out", job.out,
                                  "--steps", str(steps), "--samples", str(SAMPLES), "--batch",
                                  str(BATCH)], env)]
    check(job.wait() == [0], "torchrun failed:\n" + job.output()[-3000:])
    check({e[1] for e in job.log.entries} == {-1}, "a quorum under torchrun")
    check_job(job, want)
    h.log("torchrun and ddprun --restart-scope=all: params %s optim %s" % want)


def main():
    random.seed(os.getpid())
    arg = int(sys.argv[2]) if len(sys.argv) > 2 else None
    scenarios = {
        "kills_1x4": lambda h: kills(h, 1, 4, arg or 8, 600 if (arg or 8) <= 10 else 60 * (arg or 8)),
        "kills_2x2": lambda h: kills(h, 2, 2, arg or 6, 600),
        "wide_kills": lambda h: kills(h, 1, 4, arg or 4, 200, wide=2048),
        "second_failure": second_failure,
        "replacement_crash": replacement_crash,
        "donor_killed": lambda h: donor_killed(h, arg or 2),
        "two_nodes": two_nodes,
        "sigstop": sigstop,
        "blocked": blocked,
        "node_loss": node_loss,
        "plain": plain,
        "torchrun": torchrun,
    }
    for bad in BAD:
        scenarios[bad] = lambda h, bad=bad: bad_input(h, bad)
    return run_scenario(sys.argv[:2], scenarios)


if __name__ == "__main__":
    sys.exit(main())
