"""Multi-node tests of ddprun: separate agent processes against one ddprund (issue 4, item 7).

  multinode_harness.py SCENARIO

Every agent is a `ddprun` process of its own (its own session, so its pid is its process group);
the rendezvous is a ddprund this script starts on port 0 (read back from --port-file). Workers are
multinode_worker.py, which record their environment in $DDP_TEST_TMP/rec.*.json. Network-namespace
scenarios (root only, exit 77 otherwise) build a bridge and one namespace per host with names and
a subnet derived from this pid, and delete them on every exit path. Synchronisation is by polling
files and pids against deadlines; every process started here is stopped by pid and reaped.
"""
import contextlib
import fcntl
import glob
import json
import os
import re
import signal
import socket
import struct
import subprocess
import sys
import time

BIN = os.environ["DDP_BIN_DIR"]
SRC = os.environ["DDP_SOURCE_DIR"]
TMP = os.environ["DDP_TEST_TMP"]
WORKER = os.path.join(SRC, "tests", "integration", "multinode_worker.py")
PY = "/usr/bin/python3"
# Short rendezvous timeouts so node loss and missing nodes show within seconds, yet long enough
# that a busy 2-core CI box does not lose a live agent's heartbeats.
HEARTBEAT_TIMEOUT = 3.0
RDZV_CONF = ("join_timeout=20,last_call_timeout=0.5,close_timeout=5,keep_alive_interval=0.5,"
             "heartbeat_timeout=%g,read_timeout=10" % HEARTBEAT_TIMEOUT)


class TestFailure(Exception):
    pass


def check(cond, what):
    if not cond:
        raise TestFailure(what)


def poll(what, pred, timeout, interval=0.05):
    """Returns pred()'s first truthy value, polling every `interval` s; fails after timeout s."""
    deadline = time.monotonic() + timeout
    while True:
        value = pred()
        if value:
            return value
        if time.monotonic() > deadline:
            raise TestFailure("timed out after %.0f s waiting for %s" % (timeout, what))
        time.sleep(interval)


def json_lines(path):
    """The JSON objects of the complete lines of `path`, a file another process appends to ([] while
    it does not exist): a last line still being written (no newline yet) is left for the next read."""
    try:
        with open(path) as f:
            text = f.read()
    except FileNotFoundError:
        return []
    return [json.loads(l) for l in text[:text.rfind("\n") + 1].splitlines() if l.startswith("{")]


def alive(pid):
    """True while pid exists and is not a zombie."""
    try:
        with open("/proc/%d/stat" % pid) as f:
            return f.read().rsplit(")", 1)[1].split()[0] != "Z"
    except OSError:
        return False


class Harness:
    def __init__(self):
        self.procs = []  # (name, Popen)
        self.netns = []  # namespace names created here
        self.veths = []  # root-side veth names created here
        self.bridge = None
        self.t0 = time.monotonic()
        for path in glob.glob(os.path.join(TMP, "*")):
            if os.path.isfile(path):
                os.unlink(path)

    def log(self, msg):
        print("[%6.2f s] %s" % (time.monotonic() - self.t0, msg), flush=True)

    # -- processes --------------------------------------------------------------------------
    def spawn(self, name, argv, env=None):
        out = open(os.path.join(TMP, name + ".log"), "w")
        p = subprocess.Popen(argv, stdout=out, stderr=subprocess.STDOUT, env=env,
                             start_new_session=True)
        out.close()
        self.procs.append((name, p))
        self.log("started %s (pid %d)" % (name, p.pid))
        return p

    def output(self, name):
        with open(os.path.join(TMP, name + ".log"), errors="replace") as f:
            return f.read()

    def ddprund(self, netns=None, host="127.0.0.1"):
        port_file = os.path.join(TMP, "ddprund.port")
        argv = self.in_ns(netns, [os.path.join(BIN, "ddprund"), "--host", host, "--port", "0",
                                  "--port-file", port_file])
        self.spawn("ddprund", argv)
        port = poll("ddprund's port file", lambda: os.path.exists(port_file) and
                    open(port_file).read().strip(), 30)
        return int(port)

    def agent(self, name, flags, env_extra=None, netns=None):
        env = dict(os.environ)
        env.update({"MN_DIR": TMP, "MN_NODE": name, "PYTHON_EXEC": PY, "DDP_NO_SLURM": "1"})
        env.update(env_extra or {})
        argv = self.in_ns(netns, [os.path.join(BIN, "ddprun")] + flags +
                          ["--shutdown-timeout", "5", WORKER])
        return self.spawn(name, argv, env)

    def in_ns(self, netns, argv):
        return argv if netns is None else ["nsenter", "--net=/run/netns/" + netns] + argv

    def wait_exit(self, p, name, timeout):
        try:
            return p.wait(timeout=timeout)
        except subprocess.TimeoutExpired:
            raise TestFailure("%s (pid %d) still running after %.0f s:\n%s" %
                              (name, p.pid, timeout, self.output(name)[-3000:]))

    def stop_all(self):
        for name, p in self.procs:
            if p.poll() is None:
                os.killpg(p.pid, signal.SIGTERM)
        deadline = time.monotonic() + 10
        for name, p in self.procs:
            try:
                p.wait(timeout=max(0.1, deadline - time.monotonic()))
            except subprocess.TimeoutExpired:
                os.killpg(p.pid, signal.SIGKILL)
                p.wait()
            # Workers stay in their agent's process group even when it is gone.
            try:
                os.killpg(p.pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
        for rec in self.records():  # workers in process groups of their own
            if alive(rec["pid"]) and WORKER.encode() in read_cmdline(rec["pid"]):
                os.kill(rec["pid"], signal.SIGKILL)

    # -- records written by multinode_worker.py ---------------------------------------------
    def records(self, node=None, restart=None):
        recs = []
        for path in glob.glob(os.path.join(TMP, "rec.*.json")):
            with open(path) as f:
                rec = json.load(f)
            rec["node"] = os.path.basename(path).split(".")[1]
            if node is not None and rec["node"] != node:
                continue
            if restart is not None and int(rec["TORCHELASTIC_RESTART_COUNT"]) != restart:
                continue
            recs.append(rec)
        return recs

    def generation_with_world(self, world, nodes):
        """The records of the first generation in which every node in nodes has workers with
        WORLD_SIZE == world (all world of them), or None."""
        by_gen = {}
        for rec in self.records():
            if int(rec["WORLD_SIZE"]) == world and rec["node"] in nodes:
                by_gen.setdefault(int(rec["TORCHELASTIC_RESTART_COUNT"]), []).append(rec)
        for gen in sorted(by_gen):
            if len(by_gen[gen]) == world:
                return by_gen[gen]
        return None

    # -- network namespaces (docs/development.md#tests) --------------------------------------
    def make_netns(self, names):
        """A bridge and one namespace per name, each with its own IP; returns {name: ip}."""
        tag = "%x" % (os.getpid() % 0xFFFF)
        subnet = "10.217.%d" % (os.getpid() % 250 + 1)
        self.bridge = "mnbr" + tag
        with netns_lock():
            return self._make_netns(names, tag, subnet)

    def _make_netns(self, names, tag, subnet):
        run(["ip", "link", "add", self.bridge, "type", "bridge"])
        run(["ip", "link", "set", self.bridge, "up"])
        ips = {}
        for i, name in enumerate(names):
            ns, veth, ip = "mn%s%s" % (tag, name), "mnv%s%d" % (tag, i), "%s.%d" % (subnet, i + 1)
            run(["ip", "netns", "add", ns])
            self.netns.append(ns)
            run(["ip", "-n", ns, "link", "set", "lo", "up"])
            self.veths.append(veth)
            run(["ip", "link", "add", veth, "type", "veth", "peer", "name", "eth0", "netns", ns])
            run(["ip", "link", "set", veth, "master", self.bridge])
            run(["ip", "link", "set", veth, "up"])
            run(["ip", "-n", ns, "addr", "add", ip + "/24", "dev", "eth0"])
            run(["ip", "-n", ns, "link", "set", "eth0", "up"])
            ips[name] = (ns, ip)
        return ips

    def delete_netns(self):
        if not self.netns and not self.bridge:
            return
        with netns_lock():
            self._delete_netns()

    def _delete_netns(self):
        # /run/netns stays mounted: unmounting it while another test adds a namespace hides that
        # namespace's mount under the next bind mount of /run/netns (seen with ctest -j4).
        for ns in self.netns:
            subprocess.run(["ip", "netns", "del", ns], stderr=subprocess.DEVNULL)
        # A deleted namespace may linger (and keep its veth pair) while the kernel tears it down.
        for veth in self.veths:
            subprocess.run(["ip", "link", "del", veth], stderr=subprocess.DEVNULL)
        if self.bridge:
            subprocess.run(["ip", "link", "del", self.bridge], stderr=subprocess.DEVNULL)


def run_scenario(argv, scenarios, budget_s=None, tails=0):
    """The main() of a scenario test: runs scenarios[argv[1]](harness, *argv[2:]) with a fresh
    Harness and returns the exit code (0 pass, 1 fail, 2 usage). It prints "PASS <name>", or
    "FAIL <name>: <why>" and then the last `tails` characters of every process's output. With
    budget_s, SIGALRM (armed for budget_s), SIGTERM, SIGINT and SIGHUP fail the scenario instead of
    killing this script, so that it still cleans up before CTest's TIMEOUT would kill it uncleaned.
    Pass or fail, every process it started is stopped by pid and every namespace deleted, with
    those signals ignored meanwhile."""
    if len(argv) < 2 or argv[1] not in scenarios:
        print("usage: %s %s [ARG...]" % (argv[0], "|".join(scenarios)), file=sys.stderr)
        return 2
    name = argv[1]
    stops = (signal.SIGALRM, signal.SIGTERM, signal.SIGINT, signal.SIGHUP)
    h = Harness()

    def interrupted(sig, _frame):
        raise TestFailure("%s: the scenario is stopped (its budget is %s s; CTest allows more)" %
                          (signal.Signals(sig).name, budget_s))

    if budget_s:
        for sig in stops:
            signal.signal(sig, interrupted)
        signal.alarm(budget_s)
    try:
        scenarios[name](h, *argv[2:])
        h.log("PASS %s" % name)
        return 0
    except TestFailure as e:
        h.log("FAIL %s: %s" % (name, e))
        for proc, _ in h.procs if tails else ():
            print("---- %s.log (tail) ----\n%s" % (proc, h.output(proc)[-tails:]), flush=True)
        return 1
    finally:
        if budget_s:
            signal.alarm(0)
            for sig in stops:
                signal.signal(sig, signal.SIG_IGN)  # nothing interrupts the clean-up
        h.stop_all()
        h.delete_netns()


@contextlib.contextmanager
def netns_lock():
    """Serialises namespace set-up and tear-down between tests running in parallel: concurrent
    `ip netns add` calls may each bind-mount /run/netns onto itself."""
    with open("/tmp/ddp-multinode-netns.lock", "a") as f:
        fcntl.flock(f, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(f, fcntl.LOCK_UN)


def process_tree():
    """{pid: [living children]} for every process, from one pass over /proc."""
    tree = {}
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            with open("/proc/%s/stat" % entry) as f:
                fields = f.read().rsplit(")", 1)[1].split()
        except OSError:
            continue
        if fields[0] != "Z":
            tree.setdefault(int(fields[1]), []).append(int(entry))
    return tree


def comm(pid):
    try:
        with open("/proc/%d/comm" % pid) as f:
            return f.read().strip()
    except OSError:
        return ""


STANDBY_TAKES = re.compile(r"standby process (\d+) takes the place of local rank")


def is_standby(pid):
    """Started as a standby process (ddprun --standby-workers): DDP_STANDBY in the environment it
    started with (/proc/<pid>/environ keeps that one after the agent hands it a rank)."""
    try:
        with open("/proc/%d/environ" % pid, "rb") as f:
            return any(e.startswith(b"DDP_STANDBY=") for e in f.read().split(b"\0"))
    except OSError:
        return False


def workers(agent_pid, name="train", log=""):
    """An agent's workers named `name`: its grandchildren (agent -> guardian -> worker). Standby
    processes are left out unless `log` (the agent's output) says that one took a worker's place."""
    tree = process_tree()
    taken = {int(m.group(1)) for m in STANDBY_TAKES.finditer(log)}
    return [w for g in tree.get(agent_pid, []) for w in tree.get(g, [])
            if comm(w) == name and (w in taken or not is_standby(w))]


def read_cmdline(pid):
    try:
        with open("/proc/%d/cmdline" % pid, "rb") as f:
            return f.read()
    except OSError:
        return b""


def run(argv):
    subprocess.run(argv, check=True)


def store_values(port, pattern, host="127.0.0.1"):
    """{key: value} of the keys of the store at host:port that match the regex `pattern`, read
    with plain v2 requests (VALIDATE, LIST_KEYS, then GET per key: reading never counts as a
    heartbeat)."""
    def recv_exact(sock, n):
        out = b""
        while len(out) < n:
            chunk = sock.recv(n - len(out))
            check(chunk, "the store at %s:%d closed the connection" % (host, port))
            out += chunk
        return out

    def string(text):
        data = text.encode()
        return struct.pack("<Q", len(data)) + data

    with socket.create_connection((host, port), 10) as sock:
        sock.settimeout(10)
        sock.sendall(b"\x00" + struct.pack("<I", 0x3C85F7CE))  # VALIDATE
        sock.sendall(bytes([17]))  # LIST_KEYS
        keys = []
        for _ in range(struct.unpack("<q", recv_exact(sock, 8))[0]):
            size = struct.unpack("<Q", recv_exact(sock, 8))[0]
            keys.append(recv_exact(sock, size).decode(errors="replace"))
        out = {}
        for key in keys:
            if re.search(pattern, key):
                sock.sendall(bytes([3]) + string(key))  # GET
                size = struct.unpack("<Q", recv_exact(sock, 8))[0]
                out[key] = recv_exact(sock, size).decode(errors="replace")
        return out


def c10d(port, nnodes, nproc, run_id="mnjob", host="127.0.0.1", conf=RDZV_CONF, extra=()):
    return ["--nnodes", str(nnodes), "--nproc-per-node", str(nproc), "--rdzv-backend", "c10d",
            "--rdzv-endpoint", "%s:%d" % (host, port), "--rdzv-id", run_id,
            "--rdzv-conf", conf] + list(extra)


def train_config(samples, features, classes, shards=2, hidden=(16,), epochs=2, **settings):
    """Writes `train` data ($DDP_TEST_TMP/data, seed 1) and a config for it; returns the config's
    path. `settings`: more config keys (batch_size 16 and quiet logging unless given)."""
    data = os.path.join(TMP, "data")
    subprocess.run([os.path.join(BIN, "train"), "make-data", "--out", data, "--samples",
                    str(samples), "--features", str(features), "--classes", str(classes),
                    "--shards", str(shards), "--seed", "1"], check=True, stdout=subprocess.DEVNULL)
    config = dict({"data": data, "hidden": list(hidden), "epochs": epochs, "batch_size": 16,
                   "log_every": 1000, "progress_seconds": 1000}, **settings)
    path = os.path.join(TMP, "config.json")
    with open(path, "w") as f:
        json.dump(config, f)
    return path


def failure_summary(text):
    """ddprun's failure summary in `text`: from the "<entrypoint> FAILED" title to its closing
    rule (fails the test when there is none)."""
    m = re.search(r"={60}\n\S+ FAILED\n.*?\n={60}\n", text, re.S)
    check(m, "no failure summary in:\n" + text[-4000:])
    return m.group(0)


def root_cause(summary):
    """The summary's Root Cause section."""
    return summary[summary.index("Root Cause"):]
