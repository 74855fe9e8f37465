"""The job a storm runs on (scripts/ci/storm.py): a ddprund with --data-dir, N `ddprun` agents of
`train` workers (--restart-scope=failed, --nnodes MIN:N), the metrics file rank 0 appends, and a
ledger of every worker and standby process seen under the agents.

Single-threaded: the storm's loop calls Job.tail() and Ledger.scan() between faults; nothing here
blocks longer than a /proc pass or a file read, except Job.start()/restart_ddprund() (they wait for
ddprund's port file, 30 s at most). Every process is started through multinode_harness.Harness
(a session of its own, stopped by its process group).
"""
import json
import os
import re
import signal

from multinode_harness import (BIN, TMP, c10d, comm, is_standby, poll,  # noqa: E402
                               process_tree, train_config)

# ddprund SIGKILLed and restarted must not lose an agent (read_timeout), and an agent SIGSTOPped
# 3 s is no lost node (heartbeat_timeout, set by Job's caller: 5 s by default).
RDZV_CONF = ("join_timeout=60,last_call_timeout=1,close_timeout=10,keep_alive_interval=0.5,"
             "heartbeat_timeout=%g,read_timeout=30")
TAKES = re.compile(r"standby process (\d+) takes the place of local rank")
# The donor's pid from its log prefix ("[vm:4242 rank 0] rank 0 hands its state ...").
HANDS = re.compile(r"\[[^\]\s:]+:(\d+) rank \d+\] rank \d+ hands its state")
# The lines an agent logs when every worker restarts (launcher/agent, in_place_round.cpp).
FULL_RESTART = ("no worker is replaced in place", "every worker restarts", "restarting the job",
                "stopping the other workers")


def config(steps):
    """recovery_test.py's model and data, one metrics line per step, `steps` optimizer steps."""
    return train_config(20000, 32, 4, shards=4, hidden=(64, 64), epochs=100000, batch_size=64,
                        log_every=1, optimizer="adamw", lr=0.002, check_params_every=50,
                        max_steps=steps)


def start_time(pid):
    """The process's start time in clock ticks (a pid reused later has another one), or None."""
    try:
        with open("/proc/%d/stat" % pid) as f:
            return int(f.read().rsplit(")", 1)[1].split()[19])
    except (OSError, ValueError, IndexError):
        return None


class Agent:
    """One node's slot: its current ddprun process; state up, stopped or down (SIGKILLed).

    Its log is read incrementally, and each complete line is searched once for the pids the storm
    follows (`takes`, `hands`): the ledger looks every 0.1 s for an hour, so nothing here may
    rescan or copy the whole log per look (that grew with the log and loaded the machine the
    recoveries were measured on)."""

    def __init__(self, slot, name, proc):
        self.slot, self.name, self.proc, self.state = slot, name, proc, "up"
        self.log_offset, self._chunks, self._partial = 0, [], b""
        self.takes, self.hands = [], []  # pids, in the order the log names them

    def poll_log(self):
        """Reads what the agent logged since the last call and searches its complete lines."""
        try:
            with open(os.path.join(TMP, self.name + ".log"), "rb") as f:
                f.seek(self.log_offset)
                data = f.read()
        except FileNotFoundError:
            return
        self.log_offset += len(data)
        data = self._partial + data
        cut = data.rfind(b"\n") + 1
        self._partial = data[cut:]
        if cut:
            text = data[:cut].decode(errors="replace")
            self._chunks.append(text)
            self.takes += [int(m) for m in TAKES.findall(text)]
            self.hands += [int(m) for m in HANDS.findall(text)]

    def read_log(self, h=None):
        """The agent's output so far (a copy of it: for the checks at the end and for errors)."""
        self.poll_log()
        if len(self._chunks) > 1:
            self._chunks = ["".join(self._chunks)]
        return "".join(self._chunks) + self._partial.decode(errors="replace")


class Job:
    def __init__(self, h, tag, nodes, nproc, min_nodes, steps, heartbeat, standby=True):
        self.h, self.tag, self.nodes, self.nproc = h, tag, nodes, nproc
        self.steps, self.world = steps, nodes * nproc
        self.metrics = os.path.join(TMP, tag + ".metrics.jsonl")
        self.data_dir = os.path.join(TMP, tag + "-ddprund-data")
        self.ddprund_n, self.port, self.ddprund = 0, 0, None
        self.restart_ddprund()
        nnodes = "%d:%d" % (min_nodes, nodes) if min_nodes < nodes else str(nodes)
        self.flags = c10d(self.port, nnodes, nproc, run_id=tag, conf=RDZV_CONF % heartbeat) + [
            "--restart-scope=failed", "--max-restarts", "1000000", "--shutdown-timeout", "5",
            "--standby-workers", "1" if standby else "0"]
        self.cmd = [os.path.join(BIN, "train"), "--config", config(steps), "--metrics",
                    self.metrics]
        self.env = dict(os.environ, DDP_NO_SLURM="1")
        self.agents, self.incarnations = [], []  # current slots; every agent process started
        for slot in range(nodes):
            self.agents.append(self.start_agent(slot, ["--node-rank", "0"] if slot == 0 else []))
        self.lines, self._offset = [], 0

    def start_agent(self, slot, extra=()):
        name = "%s%d.%d" % (self.tag, slot, sum(a.slot == slot for a in self.incarnations))
        agent = Agent(slot, name, self.h.spawn(name, [os.path.join(BIN, "ddprun")] + list(extra)
                                               + self.flags + self.cmd, self.env))
        self.incarnations.append(agent)
        return agent

    def restart_ddprund(self):
        """Starts ddprund (again) on the same port and --data-dir; returns its process."""
        self.ddprund_n += 1
        name = "%s-ddprund%d" % (self.tag, self.ddprund_n)
        port_file = os.path.join(TMP, name + ".port")
        self.ddprund = self.h.spawn(name, [
            os.path.join(BIN, "ddprund"), "--host", "127.0.0.1", "--port", str(self.port),
            "--port-file", port_file, "--data-dir", self.data_dir])
        self.port = int(poll(name + "'s port file", lambda: os.path.exists(port_file) and
                             open(port_file).read().strip(), 30, interval=0.01))
        return self.ddprund

    def tail(self):
        """Reads the metrics lines appended since the last call; returns them (dicts)."""
        try:
            with open(self.metrics, "rb") as f:
                f.seek(self._offset)
                text = f.read()
        except FileNotFoundError:
            return []
        complete = text[:text.rfind(b"\n") + 1]
        self._offset += len(complete)
        new = [json.loads(l) for l in complete.splitlines() if l.startswith(b"{")]
        self.lines += new
        return new

    def last_step(self):
        return self.lines[-1]["step"] if self.lines else -1

    def output(self):
        return "".join(a.read_log(self.h) for a in self.incarnations)

    def running(self):
        """The agent processes that have not exited."""
        return [a for a in self.incarnations if a.proc.poll() is None]


class Ledger:
    """Every `train` process seen under an agent (agent -> guardian -> process), keyed by (pid,
    start time): its node, its role (standby until its agent logs that it took a rank), when it
    went and why: `killed` (by the storm), `agent` (its agent was SIGKILLed by the storm), `end`
    (after the job's last step), or `lost` (none of those: a healthy process lost)."""

    def __init__(self):
        self.entries = {}  # (pid, start) -> dict
        self.killed, self.with_agent, self.taken = set(), set(), set()

    def scan(self, job):
        tree = process_tree()
        seen = set()
        for agent in job.incarnations:
            if agent.proc.poll() is not None:  # its pid may be another process's by now
                continue
            agent.poll_log()
            self.taken |= set(agent.takes)
            for g in tree.get(agent.proc.pid, []):
                for pid in tree.get(g, []):
                    if comm(pid) != "train":
                        continue
                    key = (pid, start_time(pid))
                    if key[1] is None:
                        continue
                    seen.add(key)
                    e = self.entries.setdefault(key, {"pid": pid, "node": agent.name,
                                                      "role": "standby", "gone": None})
                    if e["role"] == "standby" and (pid in self.taken or not is_standby(pid)):
                        e["role"] = "worker"
        finished = job.last_step() >= job.steps - 1 or any(
            a.proc.poll() == 0 for a in job.incarnations)
        for key, e in self.entries.items():
            if e["gone"] is None and key not in seen and start_time(key[0]) != key[1]:
                e["gone"] = ("killed" if key[0] in self.killed else
                             "agent" if key[0] in self.with_agent else
                             "end" if finished else "lost")
                e["step"] = job.last_step()

    def workers(self, agent, job=None):
        """The pids of `agent`'s processes that hold a rank now (from the last scan)."""
        return [e["pid"] for e in self.entries.values()
                if e["node"] == agent.name and e["gone"] is None and e["role"] == "worker"]

    def standbys(self, agent):
        return [e["pid"] for e in self.entries.values()
                if e["node"] == agent.name and e["gone"] is None and e["role"] == "standby"]

    def kill(self, pid, sig=signal.SIGKILL):
        """Sends sig to pid; a SIGKILL is the storm's (the process's end is no loss)."""
        if sig == signal.SIGKILL:
            self.killed.add(pid)
        try:
            os.kill(pid, sig)
            return True
        except ProcessLookupError:
            return False

    def descendants(self, pid):
        tree, out, todo = process_tree(), [], [pid]
        while todo:
            for child in tree.get(todo.pop(), []):
                out.append(child)
                todo.append(child)
        return out

    def tally(self):
        """{(role, how it went): count}; how = gone cause, or `running` for none yet."""
        out = {}
        for e in self.entries.values():
            k = (e["role"], e["gone"] or "running")
            out[k] = out.get(k, 0) + 1
        return out
