"""Recovery from a worker SIGKILL, side by side: ddprun in place, ddprun full restart, torchrun.

  recovery_bench.py BUILD_DIR WORK_DIR          (run by scripts/bench/recovery.sh; env below)

Modes: `in place` (ddprun --restart-scope=failed), `full` (ddprun --restart-scope=all, the
default: every worker restarts and resumes from its checkpoint) and `torchrun`
(torchrun 1.13 + tests/bench/torch_ddp_recovery.py, PyTorch DDP resuming from its checkpoint).
TRAINER picks what ddprun runs in the first two: `train` (the C++ trainer) or `torch` (the same
PyTorch script as torchrun's, which recovers in place through ddprun.torch). Both trainers run the
same MLP on the same data, AdamW, one BLAS thread per worker, a checkpoint every CKPT_EVERY steps,
and their rank 0 appends one JSON line per completed step (`train`: `log_every` 1) with the step
number and the writer's wall-clock `time`.

How a recovery is timed: this process follows the progress file (inotify), reads it to its end,
notes time.monotonic() and time.time(), and SIGKILLs the victim. The recovery time is from that
monotonic stamp until this process *sees* the first line of a step completed after the kill. A
line stamped (`time`) before the kill, or seen less than 2 ms after it, is a step that was already
complete (a replacement process cannot even start in 2 ms): it counts as done before the kill.
Steps redone = the last step done before the kill - the first step after it + 1 (0 when training
continues with the interrupted step).

Experiments (each prints a markdown table):
  latency   per TOPOLOGIES entry (NxW: N agents x W workers; N=2 is two ddprun agents on a
            ddprund; torchrun's agents, one or two, always use a ddprund as their c10d store) and
            per mode:
            KILLS SIGKILLs of the highest rank, KILL_GAP s apart at least (each recovery measured
            alone), each after at least 1 s of steady steps (in place: and once each agent has a
            standby process waiting for a rank), at a step past the first checkpoint whose
            distance from the last checkpoint is drawn uniformly from [0, CKPT_EVERY) (the same
            draws for every mode: SEED)
  goodput   GOODPUT_TOPOLOGY, each mode: a fault-free run of REF_SECONDS gives steps/s; a run of
            DURATION s with a SIGKILL of a random worker every KILL_EVERY s gives the net progress
            (the last step at the end - the step at the start); goodput = the fault-free time for
            that progress / DURATION
  node_loss 2x2 with --nnodes 1:2: SIGKILL node 1's agent (its workers die with it); the time
            until the survivors complete a step; then a new agent joins and the world grows back
            to 4 before the next loss (NODE_KILLS times), for the in-place and full modes

Every process started here runs in a session of its own; it is stopped by its process group, and
any descendant still alive after that is killed by pid.
"""
import json
import os
import random
import re
import signal
import subprocess
import sys
import time

from recovery_follow import (BenchError, Follower, cmdline, descendants, environ, log,
                             proc_stat)
from recovery_tables import print_goodput, print_latency, print_node_loss

BUILD, WORK = sys.argv[1], sys.argv[2]
ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
BIN = os.path.join(BUILD, "bin")
PY = "/usr/bin/python3"
TORCH_SCRIPT = os.path.join(ROOT, "tests", "bench", "torch_ddp_recovery.py")
ENV = os.environ.get
TRAINER = ENV("TRAINER", "train")
if TRAINER not in ("train", "torch"):
    sys.exit("TRAINER=%s: train or torch" % TRAINER)
MODES = ENV("MODES", "inplace full torchrun").split()
TOPOLOGIES = ENV("TOPOLOGIES", "1x2 1x4 2x2").split()
KILLS = int(ENV("KILLS", "3"))
SEED = int(ENV("SEED", "1"))
EXPERIMENTS = ENV("EXPERIMENTS", "latency goodput node_loss").split()
DURATION = float(ENV("DURATION", "180"))
KILL_EVERY = float(ENV("KILL_EVERY", "10"))
REF_SECONDS = float(ENV("REF_SECONDS", "30"))
GOODPUT_TOPOLOGY = ENV("GOODPUT_TOPOLOGY", "1x4")
NODE_KILLS = int(ENV("NODE_KILLS", "3"))
# Latency kills of one cell come at least this far apart, so that each recovery is measured alone:
# the previous one's new standby has started and loaded (its import of torch shares the CPUs), and
# the job steps at its steady rate again.
KILL_GAP = float(ENV("KILL_GAP", "10.5"))
CKPT_EVERY = int(ENV("CKPT_EVERY", "100"))
HIDDEN = ENV("HIDDEN", "512,512")
BATCH = int(ENV("BATCH", "256"))
FEATURES, CLASSES, SAMPLES = int(ENV("FEATURES", "32")), int(ENV("CLASSES", "4")), int(ENV("SAMPLES", "65536"))
RDZV_CONF = ENV("RDZV_CONF", "join_timeout=60,last_call_timeout=0.5,close_timeout=5,"
                "keep_alive_interval=0.5,heartbeat_timeout=3,read_timeout=10")
LOG_LEVEL = ENV("LOG_LEVEL", "info")
START_TIMEOUT = float(ENV("START_TIMEOUT", "180"))
LABEL = {"inplace": "ddprun in place (`--restart-scope=failed`)",
         "full": "ddprun full restart (`--restart-scope=all`)",
         "torchrun": "torchrun 1.13 + PyTorch DDP, from checkpoint"}
if TRAINER == "torch":
    LABEL.update(inplace="ddprun in place (`--restart-scope=failed`) + ddprun.torch",
                 full="ddprun full restart (`--restart-scope=all`), from checkpoint")
PYTHONPATH = os.path.join(ROOT, "worker_runtime", "python")
AGENT_ENV = dict(os.environ, OMP_NUM_THREADS="1", DDP_NO_SLURM="1", PYTHON_EXEC=PY,
                 PYTHONPATH=os.pathsep.join(p for p in (PYTHONPATH, ENV("PYTHONPATH")) if p))
STANDBY_TAKES = re.compile(
    r"standby process (\d+) takes the place of local rank \d+ \(rank (\d+)\)")
# A step line seen this soon after the kill was complete before it (nothing restarts this fast).
ALREADY_DONE_S = 0.002


class Job:
    """One training job: its agents (ddprun or torchrun processes) and its progress file."""

    def __init__(self, name, launcher):
        self.name, self.launcher = name, launcher
        self.dir = os.path.join(WORK, name)
        os.makedirs(os.path.join(self.dir, "ckpt"))
        self.progress = os.path.join(self.dir, "progress.jsonl")
        self.follow = Follower(self.progress)
        self.agents = []  # (label, Popen)
        self.lost = set()  # pids of agents killed on purpose (node loss)
        self.config = None  # train's config (ddprun jobs)

    def spawn(self, label, argv, env=None):
        out = open(os.path.join(self.dir, label + ".log"), "w")
        p = subprocess.Popen(argv, stdout=out, stderr=subprocess.STDOUT, env=env,
                             start_new_session=True, cwd=self.dir)
        out.close()
        self.agents.append((label, p))
        return p

    def alive(self):
        return all(p.poll() is None for _, p in self.agents if p.pid not in self.lost)

    def standby_ranks(self):
        """{pid: rank} of standby processes that took a worker's place (the agents' log lines: a
        process's /proc/<pid>/environ stays the one it started with, which has no RANK)."""
        out = {}
        for label, _ in self.agents:
            with open(os.path.join(self.dir, label + ".log"), errors="replace") as f:
                for m in STANDBY_TAKES.finditer(f.read()):
                    out[int(m.group(1))] = int(m.group(2))
        return out

    def workers(self):
        """{pid: rank} of the running workers (train processes, or Python ones running the script)."""
        agents = {p.pid for _, p in self.agents}
        out = {}
        taken = None
        for _, p in self.agents:
            for pid in descendants(p.pid):
                if pid in agents:
                    continue
                env = environ(pid)
                if b"RANK" not in env and b"DDP_STANDBY" in env:
                    taken = self.standby_ranks() if taken is None else taken
                    if pid in taken and is_worker(pid, self.launcher):
                        out[pid] = taken[pid]
                    continue
                if b"RANK" in env and is_worker(pid, self.launcher):
                    out[pid] = int(env[b"RANK"])
        return out

    def standbys_waiting(self):
        """Whether each running agent has a standby process waiting for a rank: one started with
        DDP_STANDBY (and no RANK), not yet taken, that holds its FIFO open."""
        taken = self.standby_ranks()
        for label, p in self.agents:
            if p.pid in self.lost or label == "ddprund":
                continue
            ready = False
            for pid in descendants(p.pid):
                env = environ(pid)
                fifo = env.get(b"DDP_STANDBY")
                if fifo and b"RANK" not in env and pid not in taken and holds(pid, fifo):
                    ready = True
                    break
            if not ready:
                return False
        return True

    def stop(self):
        tree = []
        for _, p in self.agents:
            tree += [(pid, proc_stat(pid)) for pid in descendants(p.pid)]
            if p.poll() is None:
                try:
                    os.killpg(p.pid, signal.SIGTERM)
                except ProcessLookupError:
                    pass
        deadline = time.monotonic() + 15
        for _, p in self.agents:
            try:
                p.wait(timeout=max(0.1, deadline - time.monotonic()))
            except subprocess.TimeoutExpired:
                pass
            try:
                os.killpg(p.pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
            p.wait()
        for pid, st in tree:  # descendants that left the group: same pid and start time
            now = proc_stat(pid)
            if st and now and now[2] == st[2] and now[0] != "Z":
                os.kill(pid, signal.SIGKILL)
        self.follow.close()

    def output(self):
        text = ""
        for label, _ in self.agents:
            with open(os.path.join(self.dir, label + ".log"), errors="replace") as f:
                text += "--- %s\n%s" % (label, f.read()[-3000:])
        return text


def is_worker(pid, launcher):
    """A worker process: `train`, or an interpreter running the PyTorch script (not torchrun's
    agent, not a ddprun guardian, whose command line is its agent's)."""
    if launcher == "ddprun" and TRAINER == "train":
        return open_comm(pid) == "train"
    argv = cmdline(pid)
    return open_comm(pid).startswith("python") and TORCH_SCRIPT.encode() in argv and \
        b"torch.distributed.run" not in argv


def holds(pid, path):
    try:
        return any(os.readlink("/proc/%d/fd/%s" % (pid, fd)).encode() == path
                   for fd in os.listdir("/proc/%d/fd" % pid))
    except OSError:
        return False


def open_comm(pid):
    try:
        with open("/proc/%d/comm" % pid) as f:
            return f.read().strip()
    except OSError:
        return ""


# -- launching ---------------------------------------------------------------------------------
def write_config():
    data = os.path.join(WORK, "data")
    subprocess.run([os.path.join(BIN, "train"), "make-data", "--out", data, "--samples", str(SAMPLES),
                    "--features", str(FEATURES), "--classes", str(CLASSES), "--shards", "4",
                    "--seed", "1"], check=True, stdout=subprocess.DEVNULL)
    return data


def ddprund():
    """Starts a ddprund on 127.0.0.1, port from the OS; returns (Job holding it, port)."""
    job = Job("ddprund-%d" % next_id(), "none")
    port_file = os.path.join(job.dir, "port")
    job.spawn("ddprund", [os.path.join(BIN, "ddprund"), "--host", "127.0.0.1", "--port", "0",
                          "--port-file", port_file])
    deadline = time.monotonic() + 30
    while not (os.path.exists(port_file) and open(port_file).read().strip()):
        if time.monotonic() > deadline or not job.alive():
            job.stop()
            raise BenchError("ddprund did not write its port:\n" + job.output())
        time.sleep(0.02)
    return job, int(open(port_file).read())


_ids = iter(range(1, 1 << 30))


def next_id():
    return next(_ids)


def train_config(job, data):
    path = os.path.join(job.dir, "train.json")
    with open(path, "w") as f:
        json.dump({"data": data, "hidden": [int(h) for h in HIDDEN.split(",")], "device": "cpu",
                   "epochs": 1000000, "batch_size": BATCH, "optimizer": "adamw", "lr": 0.001,
                   "log_every": 1, "progress_seconds": 1e9, "checkpoint_every": CKPT_EVERY,
                   "checkpoint_dir": os.path.join(job.dir, "ckpt")}, f)
    return path


def start(mode, nodes, nproc, data, port=None, nnodes=None):
    """Starts a job of `nodes` agents x `nproc` workers; returns it."""
    job = Job("%s-%dx%d-%d" % (mode, nodes, nproc, next_id()), "torchrun" if mode == "torchrun" else "ddprun")
    if job.launcher == "ddprun" and TRAINER == "train":
        job.config = train_config(job, data)
    for n in range(nodes):
        job.spawn("node%d" % n, agent_argv(job, mode, n, nodes, nproc, data, port, nnodes), AGENT_ENV)
    return job


def agent_argv(job, mode, n, nodes, nproc, data, port, nnodes=None):
    nnodes = nnodes or str(nodes)
    if mode == "torchrun":
        argv = [PY, "-m", "torch.distributed.run", "--nproc_per_node=%d" % nproc,
                "--max_restarts=1000", "--monitor_interval=0.1", "--redirects=1", "--tee=1",
                "--log_dir", os.path.join(job.dir, "logs%d-%d" % (n, next_id()))]
        argv += ["--nnodes=" + nnodes, "--rdzv_backend=c10d",
                     "--rdzv_endpoint=127.0.0.1:%d" % port, "--rdzv_id=" + job.name,
                     "--rdzv_conf=is_host=false,join_timeout=60,read_timeout=60"]
        return argv + torch_args(job, data)
    argv = [os.path.join(BIN, "ddprun"), "--nproc-per-node", str(nproc), "--max-restarts", "1000",
            "--restart-scope", "failed" if mode == "inplace" else "all", "--shutdown-timeout", "2",
            "--log-level", LOG_LEVEL]
    if nodes == 1:
        argv += ["--standalone"]
    else:
        argv += ["--nnodes", nnodes, "--rdzv-backend", "c10d", "--rdzv-endpoint",
                 "127.0.0.1:%d" % port, "--rdzv-id", job.name, "--rdzv-conf", RDZV_CONF]
        if n == 0:
            argv += ["--node-rank", "0"]
    if TRAINER == "torch":  # a *.py entry point: ddprun runs $PYTHON_EXEC -u script
        return argv + torch_args(job, data)
    return argv + [os.path.join(BIN, "train"), "--config", job.config, "--metrics", job.progress]


def torch_args(job, data):
    return [TORCH_SCRIPT, "--data", data, "--hidden", HIDDEN, "--batch-size", str(BATCH),
            "--checkpoint-dir", os.path.join(job.dir, "ckpt"), "--checkpoint-every", str(CKPT_EVERY),
            "--progress", job.progress]


def needs_store(mode, nodes):
    """A ddprund for the job: two agents, or torchrun (1.13's --standalone binds port 29400, which
    another job on the machine may hold; the ddprund's port comes from the OS)."""
    return nodes > 1 or mode == "torchrun"


def topology(spec):
    nodes, nproc = spec.split("x")
    return int(nodes), int(nproc)


# -- one kill ----------------------------------------------------------------------------------
def steady(job, seconds, world, phase=None, standby=False):
    """Waits until the job completed steps for `seconds` s with `world` workers running (and with
    `standby`, until each agent has a standby process waiting for a rank); with a `phase`, then
    until it completes a step s >= CKPT_EVERY with s % CKPT_EVERY == phase (so that a kill lands
    at a known point between two checkpoints, and one exists)."""
    job.follow.until("the first step", lambda new: job.follow.lines, START_TIMEOUT, job.alive)
    if standby:
        job.follow.until("a standby process on each node", lambda new: job.standbys_waiting(),
                         START_TIMEOUT, job.alive)
    t0 = time.monotonic()
    job.follow.until("%.1f s of steps" % seconds, lambda new: new and time.monotonic() - t0 >= seconds
                     and len(job.workers()) == world, START_TIMEOUT, job.alive)
    if phase is not None:
        job.follow.until("step %d after a checkpoint" % phase, lambda new: any(
            r["step"] >= CKPT_EVERY and r["step"] % CKPT_EVERY == phase for _, r in new),
            START_TIMEOUT, job.alive)


def measure_kill(job, victim_pids, timeout=START_TIMEOUT):
    """SIGKILLs victim_pids (read the progress file to its end first); returns (seconds from the
    kill to the first step completed after it, steps redone, that step)."""
    job.follow.read()
    done = max((r["step"] for _, r in job.follow.lines[-50:]), default=0)
    wall, t_kill = time.time(), time.monotonic()
    for pid in victim_pids:
        os.kill(pid, signal.SIGKILL)

    def after(new):
        nonlocal done
        for seen, rec in new:
            if rec["time"] < wall or seen - t_kill < ALREADY_DONE_S:
                done = max(done, rec["step"])
                continue
            return seen, rec
        return None

    seen, rec = job.follow.until("a step after the kill", after, timeout, job.alive)
    return seen - t_kill, max(0, done - rec["step"] + 1), rec["step"]


def victim(job, rank=None):
    ws = job.workers()
    if not ws:
        return None
    if rank is None:
        return random.choice(sorted(ws))
    return max(ws, key=lambda p: (ws[p] == rank, ws[p]))


# -- experiments -------------------------------------------------------------------------------
def latency(data):
    rows = []
    for spec in TOPOLOGIES:
        nodes, nproc = topology(spec)
        for mode in MODES:
            store, port = ddprund() if needs_store(mode, nodes) else (None, None)
            job = start(mode, nodes, nproc, data, port)
            times, redone = [], []
            phases = random.Random(SEED * 1000 + TOPOLOGIES.index(spec))
            try:
                last = None
                for k in range(KILLS):
                    if last is not None:
                        follow_until(job, last + KILL_GAP)
                    steady(job, 1.0, nodes * nproc, phases.randrange(CKPT_EVERY), mode == "inplace")
                    v = victim(job, nodes * nproc - 1)
                    last = time.monotonic()
                    dt, r, step = measure_kill(job, [v])
                    times.append(dt)
                    redone.append(r)
                    log("%s %s kill %d: %.1f ms, %d steps redone (resumed at step %d)" %
                        (spec, mode, k + 1, dt * 1e3, r, step))
            except BenchError as e:
                log("%s %s: %s\n%s" % (spec, mode, e, job.output()))
            finally:
                job.stop()
                if store:
                    store.stop()
            rows.append((spec, mode, times, redone))
    return rows


def rate_of(job, seconds, world):
    """Steps/s over `seconds` s of a running job, from the progress lines (this process's clock)."""
    steady(job, 2.0, world)
    job.follow.read()
    s0, t0 = job.follow.last()["step"], time.monotonic()
    time.sleep(seconds)
    job.follow.read()
    s1, t1 = job.follow.last()["step"], time.monotonic()
    return (s1 - s0) / (t1 - t0)


def follow_until(job, t):
    """Reads the progress lines as they come (each stamped when seen) until monotonic time t."""
    job.follow.until("time", lambda new: time.monotonic() >= t, max(0.0, t - time.monotonic()) + 5)


def in_run_rate(lines, t0, t1):
    """Steps/s of the faulted run itself, away from its faults: over the second half of every
    interval between two kills (and before the first), where the steps rose without a restart and
    the first line came within 0.5 s of the half's start (so no recovery was still going on)."""
    steps, secs, a = 0, 0.0, t0 + KILL_EVERY / 2
    while a < t1:
        b = min(a + KILL_EVERY / 2, t1)
        seg = [(seen, r["step"]) for seen, r in lines if a <= seen < b]
        if len(seg) > 1 and seg[0][0] - a < 0.5 and all(y > x for (_, x), (_, y) in zip(seg, seg[1:])):
            steps += seg[-1][1] - seg[0][1]
            secs += seg[-1][0] - seg[0][0]
        a += KILL_EVERY
    return steps / secs if secs else float("nan")


def goodput(data):
    nodes, nproc = topology(GOODPUT_TOPOLOGY)
    rows = []
    refs = {}
    for mode in MODES:
        launcher = "torchrun" if mode == "torchrun" else "ddprun"
        store, port = ddprund() if needs_store(mode, nodes) else (None, None)
        try:
            if launcher not in refs:
                job = start(mode, nodes, nproc, data, port)
                try:
                    refs[launcher] = rate_of(job, REF_SECONDS, nodes * nproc)
                    log("%s fault-free: %.1f steps/s" % (launcher, refs[launcher]))
                finally:
                    job.stop()
            job = start(mode, nodes, nproc, data, port)
            try:
                steady(job, 2.0, nodes * nproc)
                job.follow.read()
                s0, t0 = job.follow.last()["step"], time.monotonic()
                kills, tick = 0, t0 + KILL_EVERY
                while tick < t0 + DURATION:
                    follow_until(job, tick)
                    v = None
                    while v is None and time.monotonic() < t0 + DURATION:
                        v = victim(job)
                        if v is None:
                            time.sleep(0.01)
                    if v is not None:
                        try:
                            os.kill(v, signal.SIGKILL)
                            kills += 1
                        except ProcessLookupError:
                            pass
                    tick += KILL_EVERY
                    if not job.alive():
                        raise BenchError("the job ended:\n" + job.output())
                follow_until(job, t0 + DURATION)
                s1, t1 = job.follow.last()["step"], time.monotonic()
            finally:
                job.stop()
            free = (s1 - s0) / refs[launcher]
            inrun = in_run_rate(job.follow.lines, t0, t1)
            rows.append((mode, refs[launcher], s1 - s0, kills, t1 - t0, free / (t1 - t0), inrun))
            log("%s goodput: %d steps in %.1f s with %d kills: %.1f%% (%.1f%% against the in-run "
                "rate %.1f steps/s)" % (mode, s1 - s0, t1 - t0, kills, 100 * free / (t1 - t0),
                                        100 * (s1 - s0) / inrun / (t1 - t0), inrun))
        except BenchError as e:
            log("goodput %s: %s" % (mode, e))
        finally:
            if store:
                store.stop()
    return rows


def node_loss(data):
    rows = []
    for mode in [m for m in MODES if m != "torchrun"]:
        store, port = ddprund()
        job = start(mode, 2, 2, data, port, nnodes="1:2")
        times = []
        phases = random.Random(SEED * 1000 + 999)
        try:
            for k in range(NODE_KILLS):
                job.follow.until("world size 4", lambda new: job.follow.last() and
                                 job.follow.last()["world_size"] == 4, START_TIMEOUT, job.alive)
                steady(job, 1.0, 4, phases.randrange(CKPT_EVERY))
                agent = job.agents[-1][1]  # node 1 (or the agent that took its place)
                job.lost.add(agent.pid)
                dt, r, step = measure_kill(job, [agent.pid])
                times.append(dt)
                log("node loss %s %d: %.1f ms to the survivors' step %d (world %d, %d redone)" %
                    (mode, k + 1, dt * 1e3, step, job.follow.last()["world_size"], r))
                agent.wait()
                job.spawn("node1-%d" % (k + 1), agent_argv(job, mode, 1, 2, 2, data, port, "1:2"),
                          AGENT_ENV)
        except BenchError as e:
            log("node loss %s: %s\n%s" % (mode, e, job.output()))
        finally:
            job.stop()
            store.stop()
        rows.append((mode, times))
    return rows


def main():
    random.seed(SEED)
    data = write_config()
    load0 = open("/proc/loadavg").read().split()[:3]
    out = {}
    if "latency" in EXPERIMENTS:
        out["latency"] = latency(data)
    if "goodput" in EXPERIMENTS:
        out["goodput"] = goodput(data)
    if "node_loss" in EXPERIMENTS and "2x2" in TOPOLOGIES:
        out["node_loss"] = node_loss(data)
    load1 = open("/proc/loadavg").read().split()[:3]
    print("ddprun runs %s; MLP %d-%s-%d, batch %d per rank, AdamW, checkpoint every %d steps, "
          "OMP_NUM_THREADS=1; %d CPUs; load average before %s, after %s\n" %
          ("`train`" if TRAINER == "train" else "tests/bench/torch_ddp_recovery.py (as torchrun does)",
           FEATURES, HIDDEN.replace(",", "-"), CLASSES, BATCH, CKPT_EVERY, os.cpu_count(),
           " ".join(load0), " ".join(load1)))
    if "latency" in out:
        print_latency(out["latency"], LABEL, KILLS)
    if "goodput" in out:
        print_goodput(out["goodput"], LABEL, GOODPUT_TOPOLOGY, KILL_EVERY, DURATION, REF_SECONDS)
    if "node_loss" in out:
        print_node_loss(out["node_loss"], LABEL, RDZV_CONF, NODE_KILLS)
    with open(os.path.join(WORK, "results.json"), "w") as f:
        json.dump(out, f)


if __name__ == "__main__":
    main()
