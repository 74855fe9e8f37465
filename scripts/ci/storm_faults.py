"""The faults a storm injects (scripts/ci/storm.py) and the loop that injects them.

Kinds (--mix names):
  worker         SIGKILL a worker
  standby        SIGKILL a standby process while it waits
  agent_kill     SIGKILL an agent (its workers die with it); a new agent for its slot starts
                 0.5-2 s later (the agent comes back); only while more than MIN agents run
  agent_stop     SIGSTOP an agent for 3 s (its workers run on)
  ddprund        SIGKILL ddprund; it starts again 0.5 s later on its port and --data-dir
  replacement    SIGKILL a worker, then its replacement as soon as its agent hands it the rank
  donor          SIGKILL a worker, then the rank that hands its state over, while it sends
  two_workers    SIGKILL two workers of different agents at once
  survivor_stop  SIGKILL a worker and SIGSTOP a worker of another agent for 5 s

Storm.step() does one pass: reads new metrics lines, closes latency samples, scans the ledger
(every 100 ms), runs due delayed actions (SIGCONT, agent comeback, ddprund restart) and injects the
next fault when it is due and the job made a step since the previous fault: every rank holds the
state again by then (faults during a recovery are kinds of their own), so the storm never kills
every holder of the state, which nothing but a full restart from a checkpoint survives. A fault
that waits for the product (replacement, donor) polls every millisecond for at most 10 s, running
due actions meanwhile.
"""
import signal
import time


# storm.py keeps the same tuple (it parses --mix before this module can be imported).
KINDS = ("worker", "standby", "agent_kill", "agent_stop", "ddprund", "replacement", "donor",
         "two_workers", "survivor_stop")
# Faults whose first SIGKILL hits a worker: each gives a latency sample (kill -> next step).
KILLS_WORKER = ("worker", "replacement", "donor", "two_workers", "survivor_stop")
ALREADY_DONE_S = 0.002  # a line stamped within 2 ms of a kill is a step done before it


class Storm:
    def __init__(self, job, ledger, rng, weights, interval, min_nodes, log):
        self.job, self.ledger, self.rng, self.log = job, ledger, rng, log
        self.weights, self.interval, self.min_nodes = weights, interval, min_nodes
        self.pending = []  # [(monotonic due, what, fn)]
        self.faults = []   # dicts: n, kind, t, wall, detail, end_wall (delayed action ran)
        self.samples = []  # dicts: fault, kind, wall, t, latency (s) or None, steady
        self.first_open = 0  # samples before this index have their latency
        self.next_at = time.monotonic() + rng.uniform(*interval)
        self.last_scan = 0.0
        self.stopped = set()  # worker pids SIGSTOPped now

    # -- one pass of the loop ------------------------------------------------------------------
    def step(self, inject):
        now = time.monotonic()
        self.close_samples(self.job.tail())
        if now - self.last_scan >= 0.1:
            self.ledger.scan(self.job)
            self.last_scan = now
        self.run_due()
        if inject and now >= self.next_at and self.stepped_since_fault():
            self.inject()
            self.next_at = time.monotonic() + self.rng.uniform(*self.interval)

    def stepped_since_fault(self):
        if not self.faults:
            return True
        return bool(self.job.lines) and self.job.lines[-1]["step"] > self.faults[-1]["step"]

    def run_due(self):
        now = time.monotonic()
        for item in [p for p in self.pending if p[0] <= now]:
            self.pending.remove(item)
            item[2]()

    def later(self, delay, what, fn):
        """Runs fn in delay s; the fault being injected lasts until then (its "end_wall")."""
        fault = self.faults[-1]

        def run():
            fn()
            fault["end_wall"] = time.time()
        self.pending.append((time.monotonic() + delay, what, run))

    def wait_for(self, pred, timeout):
        """pred()'s first truthy value, polled every ms for at most timeout s (None after)."""
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            value = pred()
            if value:
                return value
            self.run_due()
            time.sleep(0.001)
        return None

    def close_samples(self, new):
        for line in new:
            # Only the samples still open: the storm's loop looks 100 times a second for an hour.
            for s in [s for s in self.samples[self.first_open:] if s["latency"] is None]:
                if line["time"] >= s["wall"] + ALREADY_DONE_S:
                    s["latency"] = line["time"] - s["wall"]
                    s["world"] = line["world_size"]
                    # Steady: no other fault from 1 s before the kill to the step that ended it.
                    # A fault lasts until its delayed action (SIGCONT, comeback, restart) ran:
                    # a kill 0.1 s after a 5 s SIGSTOP ended meets a recovery still under way.
                    s["steady"] = s["steady"] and not any(
                        f is not s["fault"] and f["wall"] <= line["time"] and
                        f.get("end_wall", f["wall"]) >= s["wall"] - 1 for f in self.faults)
            while (self.first_open < len(self.samples) and
                   self.samples[self.first_open]["latency"] is not None):
                self.first_open += 1

    # -- choosing ------------------------------------------------------------------------------
    def up(self):
        return [a for a in self.job.agents if a.state == "up" and a.proc.poll() is None]

    def victims(self, agents=None):
        """(agent, worker pid) pairs of agents that run and are not stopped."""
        return [(a, w) for a in (agents or self.up()) for w in self.ledger.workers(a)
                if w not in self.stopped]

    def feasible(self, kind):
        up, victims = self.up(), self.victims()
        if kind in ("worker", "replacement", "donor", "survivor_stop"):
            return bool(victims) and (kind != "survivor_stop" or
                                      len({a.slot for a, _ in victims}) >= 2)
        if kind == "two_workers":
            return len({a.slot for a, _ in victims}) >= 2
        if kind == "standby":
            return any(self.ledger.standbys(a) for a in up)
        if kind == "agent_kill":
            return len(up) > self.min_nodes and all(
                a.state != "down" for a in self.job.agents) and self.job.ddprund.poll() is None
        if kind == "agent_stop":
            return bool(up)
        if kind == "ddprund":
            return self.job.ddprund.poll() is None
        return False

    def inject(self):
        kinds = [k for k in self.weights if self.weights[k] > 0 and self.feasible(k)]
        if not kinds:
            return
        kind = self.rng.choices(kinds, [self.weights[k] for k in kinds])[0]
        fault = {"n": len(self.faults) + 1, "kind": kind, "t": time.monotonic(),
                 "wall": time.time(), "detail": "",
                 "step": self.job.lines[-1]["step"] if self.job.lines else -1}
        self.faults.append(fault)
        if kind in KILLS_WORKER:
            # Steady: the full world training, every agent up, ddprund up, nothing stopped or
            # about to come back (no delayed action pending).
            steady = (len(self.up()) == self.job.nodes and self.job.ddprund.poll() is None and
                      not self.pending and not self.stopped and
                      bool(self.job.lines) and self.job.lines[-1]["world_size"] == self.job.world)
            self.samples.append({"fault": fault, "kind": kind, "wall": fault["wall"],
                                 "latency": None, "steady": steady})
        fault["detail"] = getattr(self, "fault_" + kind)(fault) or ""
        self.log("fault %d: %s %s" % (fault["n"], kind, fault["detail"]))

    def sigkill_worker(self, fault, agents=None, victim=None):
        agent, pid = victim or self.rng.choice(self.victims(agents))
        fault["wall"] = time.time()
        if self.samples and self.samples[-1]["fault"] is fault:
            self.samples[-1]["wall"] = fault["wall"]
        self.ledger.kill(pid)
        return agent, pid

    # -- the faults ----------------------------------------------------------------------------
    def fault_worker(self, fault):
        agent, pid = self.sigkill_worker(fault)
        return "pid %d on %s" % (pid, agent.name)

    def fault_standby(self, fault):
        agent = self.rng.choice([a for a in self.up() if self.ledger.standbys(a)])
        pid = self.rng.choice(self.ledger.standbys(agent))
        self.ledger.kill(pid)
        return "pid %d on %s" % (pid, agent.name)

    def fault_agent_kill(self, fault):
        agent = self.rng.choice(self.up())
        self.ledger.with_agent.update(self.ledger.descendants(agent.proc.pid))
        self.ledger.kill(agent.proc.pid)
        agent.state = "down"
        delay = self.rng.uniform(0.5, 2.0)

        def comeback():
            self.job.agents[agent.slot] = self.job.start_agent(agent.slot)
        self.later(delay, "agent comeback", comeback)
        return "%s (pid %d); a new agent in %.1f s" % (agent.name, agent.proc.pid, delay)

    def fault_agent_stop(self, fault):
        agent = self.rng.choice(self.up())
        agent.state = "stopped"
        self.ledger.kill(agent.proc.pid, signal.SIGSTOP)

        def cont():
            self.ledger.kill(agent.proc.pid, signal.SIGCONT)
            agent.state = "up"
        self.later(3.0, "SIGCONT " + agent.name, cont)
        return "%s (pid %d) for 3 s" % (agent.name, agent.proc.pid)

    def fault_ddprund(self, fault):
        old = self.job.ddprund
        old.kill()
        old.wait()
        self.later(0.5, "ddprund restart", self.job.restart_ddprund)
        return "pid %d; restarts in 0.5 s" % old.pid

    def fault_replacement(self, fault):
        agent, pid = self.rng.choice(self.victims())
        agent.poll_log()
        seen = len(agent.takes)
        before = set(self.ledger.workers(agent)) | set(self.ledger.standbys(agent))
        self.sigkill_worker(fault, victim=(agent, pid))

        scanned = [0.0]

        def new_worker():
            agent.poll_log()
            taken = agent.takes[seen:]
            if taken:
                return int(taken[0])
            # A replacement spawned without a standby shows in /proc only: a pass over it every
            # 10 ms, not every look (a pass per millisecond was most of a CPU beside the recovery).
            if time.monotonic() - scanned[0] < 0.01:
                return None
            scanned[0] = time.monotonic()
            self.ledger.scan(self.job)
            fresh = set(self.ledger.workers(agent)) - before
            return min(fresh) if fresh else None
        repl = self.wait_for(new_worker, 10)
        if repl is None:
            return "pid %d on %s; no replacement seen in 10 s" % (pid, agent.name)
        self.ledger.kill(repl)
        return "pid %d on %s, then its replacement %d" % (pid, agent.name, repl)

    def fault_donor(self, fault):
        agents = list(self.job.incarnations)
        for a in agents:
            a.poll_log()
        seen = {a.name: len(a.hands) for a in agents}
        agent, pid = self.sigkill_worker(fault)

        def hand_over():
            for a in agents:
                a.poll_log()
            return [d for a in agents for d in a.hands[seen[a.name]:]]
        donors = self.wait_for(hand_over, 10)
        if not donors:
            return "pid %d on %s; no hand-over seen in 10 s" % (pid, agent.name)
        donor = int(donors[0])
        known = {e["pid"] for e in self.ledger.entries.values() if e["gone"] is None}
        if donor not in known:
            return "pid %d on %s; donor %d not a process of the job" % (pid, agent.name, donor)
        self.ledger.kill(donor)
        return "pid %d on %s, then the donor %d" % (pid, agent.name, donor)

    def fault_two_workers(self, fault):
        a1, p1 = self.sigkill_worker(fault)
        others = [a for a in self.up() if a.slot != a1.slot]
        a2, p2 = self.rng.choice(self.victims(others))
        self.ledger.kill(p2)
        return "pid %d on %s and pid %d on %s" % (p1, a1.name, p2, a2.name)

    def fault_survivor_stop(self, fault):
        a1, p1 = self.sigkill_worker(fault)
        others = [(a, w) for a, w in self.victims([a for a in self.up() if a.slot != a1.slot])]
        if not others:
            return "pid %d on %s; no survivor to stop" % (p1, a1.name)
        a2, p2 = self.rng.choice(others)
        self.ledger.kill(p2, signal.SIGSTOP)
        self.stopped.add(p2)

        def cont():
            self.ledger.kill(p2, signal.SIGCONT)
            self.stopped.discard(p2)
        self.later(5.0, "SIGCONT %d" % p2, cont)
        return "pid %d on %s; pid %d on %s stopped 5 s" % (p1, a1.name, p2, a2.name)

    def finish_pending(self, timeout):
        """Runs the delayed actions still due (SIGCONTs, comebacks, restarts) within timeout s."""
        deadline = time.monotonic() + timeout
        while self.pending and time.monotonic() < deadline:
            self.step(inject=False)
            time.sleep(0.01)
