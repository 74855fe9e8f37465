"""Every example of the README and docs/ runs (issue 10, item 5): `readme_examples_test.py local|slurm`.

Reads README.md, then every docs/*.md by name (the manual the README links), takes every command of
every ```bash block (continuation lines joined, comments dropped) and decides for each by the first
matching RULE what to do with it. A command no rule matches fails the test (a new example must be
runnable, or skipped here with a stated reason), and so does a rule that matches no command (the
docs changed under it). Skips are only for what needs GPUs, another host's service, or what would
run this test itself.

  local  the quick start first (./scripts/quickstart.sh: setup, build — a no-op in a built tree —,
         the data where configs/quickstart.json looks), then every other runnable example from the
         repository root, in that order (README.md, then docs/*.md), with build/bin first on PATH,
         then Debian's default PATH (so `python3` is Debian's, with python3-torch, as the docs
         assume, whatever a developer's shell puts first), and TMPDIR pointing at this test's scratch dir. Each must exit 0 (or what its rule expects, checked further).
         Examples naming hosts and ports other machines would have (head:29400, 10.0.0.1:29500)
         run on loopback: a `ddprund` example is started with --port 0 --port-file and every later
         `head:<its port>` names the port it got; a static pair runs both of its node ranks.
  slurm  the examples that need Slurm but no GPUs, on the slurm_cluster fixture (4 nodes).
"""
import os
import re
import shlex
import signal
import socket
import subprocess
import sys
import time

SRC = os.environ["DDP_SOURCE_DIR"]
BIN = os.environ["DDP_BIN_DIR"]
TMP = os.environ["DDP_TEST_TMP"]
BUILD = os.path.dirname(BIN)
TIMEOUT_S = 240
DEBIAN_PATH = "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"

GPU = "needs GPUs"
# (regex on the command, action, detail). First match wins.
RULES = [
    (r"^\./scripts/test\.sh$", "skip", "runs the whole test suite, this test included"),
    (r"^\./scripts/quickstart\.sh$", "quickstart", None),
    (r"--nproc-per-node=gpu|--gpus-per-node|gpu_check\.sh", "skip", GPU),
    (r"^head -c 32 /dev/urandom \| base64 > /etc/ddprun/token", "skip",
     "a site's set-up step (writes /etc)"),
    (r"--tls-cert ddprund\.pem|tls_ca=ca\.pem", "skip", "needs the site's certificate files"),
    (r"^scripts/package\.sh$", "skip",
     "builds the Debian package: package_deb_test runs it and installs the package in a Debian root"),
    (r"^apt install \./ddprun_", "skip",
     "installs on a cluster node: package_deb_test installs the package with apt in a Debian root"),
    (r"^(systemctl|journalctl) ", "skip",
     "needs systemd as init; package_ddprund_service_test verifies the unit and its start-up failures"),
    (r"^scp ", "skip", "copies to another host"),
    (r"^\./scripts/scaling_report\.sh", "skip",
     "a minutes-long measurement that rewrites docs/; scaling_report_test.sh runs it on a few steps"),
    (r"^sbatch scripts/slurm/ddprun\.sbatch$", "sbatch", None),
    (r"^srun ", "slurm", None),
    (r"^ddprund\b", "daemon", None),
    (r"^(?=.*--rdzv-backend=static)(?=.*--node-rank=0)", "static_pair", None),
    (r"--fail-at-step 150 --fail-rank 1$", "expect_root_cause", None),
    (r"^torchrun ", "run", None),
    (r"^(PYTHON_EXEC=\S+ )?ddprun ", "run", None),
    (r"^train ", "run", None),
]


class TestFailure(Exception):
    pass


def check(cond, what):
    if not cond:
        raise TestFailure(what)


def doc_files():
    """README.md, then every docs/*.md by name: the README and the pages it links."""
    docs = os.path.join(SRC, "docs")
    return [os.path.join(SRC, "README.md")] + sorted(
        os.path.join(docs, n) for n in os.listdir(docs) if n.endswith(".md"))


def readme_commands():
    """Every command of every ```bash block of the doc files, in order."""
    commands = []
    for path in doc_files():
        commands += file_commands(path)
    return commands


def file_commands(path):
    """Every command of every ```bash block of one file, in order."""
    commands, block, joined = [], None, ""
    for line in open(path):
        line = line.rstrip("\n")
        if block is None:
            if line.strip() == "```bash":
                block = []
            continue
        if line.strip() == "```":
            block = None
            continue
        code = re.sub(r"(^|\s)#.*$", "", line).rstrip()  # comments (no '#' inside our commands)
        if code.endswith("\\"):
            joined += code[:-1].strip() + " "
            continue
        code = (joined + code.strip()).strip()
        joined = ""
        if code:
            commands.append(code)
    return commands


def classify(commands):
    plan, used = [], set()
    for cmd in commands:
        for i, (pattern, action, detail) in enumerate(RULES):
            if re.search(pattern, cmd):
                plan.append((cmd, action, detail))
                used.add(i)
                break
        else:
            raise TestFailure("command of README.md or docs/ not covered by this test: " + cmd)
    stale = [RULES[i][0] for i in range(len(RULES)) if i not in used]
    check(not stale, "rules matching no command of README.md or docs/ (update the test): %s" % stale)
    return plan


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class Runner:
    def __init__(self, mode):
        self.mode = mode
        self.t0 = time.monotonic()
        self.daemons = []
        self.ports = {}  # documented port -> the one a daemon got here
        self.n = 0
        self.env = dict(os.environ, PATH=BIN + ":" + DEBIAN_PATH, TMPDIR=TMP)
        self.env.pop("PYTHON_EXEC", None)
        if mode == "local":
            self.env["DDP_NO_SLURM"] = "1"

    def log(self, msg):
        print("[%6.1f s] %s" % (time.monotonic() - self.t0, msg), flush=True)

    def substitute(self, cmd):
        for documented, actual in self.ports.items():
            cmd = re.sub(r"\bhead:%d\b" % documented, "127.0.0.1:%d" % actual, cmd)
        return cmd

    def run(self, cmd, expect=0, extra_env=None):
        self.n += 1
        out = os.path.join(TMP, "cmd%02d.log" % self.n)
        env = dict(self.env, **(extra_env or {}))
        self.log("$ " + cmd)
        with open(out, "w") as f:
            p = subprocess.Popen(["bash", "-c", cmd], cwd=SRC, env=env, stdout=f,
                                 stderr=subprocess.STDOUT, start_new_session=True)
            try:
                rc = p.wait(timeout=TIMEOUT_S)
            except subprocess.TimeoutExpired:
                os.killpg(p.pid, signal.SIGKILL)
                p.wait()
                raise TestFailure("%s: still running after %d s" % (cmd, TIMEOUT_S))
        text = open(out, errors="replace").read()
        check(rc == expect, "%s: exited %d, want %d:\n%s" % (cmd, rc, expect, text[-4000:]))
        return text

    def quickstart(self, cmd):
        build_type = re.search(r"^CMAKE_BUILD_TYPE:\w+=(.*)$",
                               open(os.path.join(BUILD, "CMakeCache.txt")).read(), re.M)
        self.run(cmd, extra_env={"DDP_BUILD_DIR": BUILD, "DDP_JOBS": "2",
                                 "DDP_BUILD_TYPE": build_type.group(1) if build_type else ""})
        data = os.path.join(SRC, "build", "quickstart", "data", "index.json")
        check(os.path.exists(data), "the quick start made no data where the config looks")
        events = os.listdir(os.path.join(SRC, "build", "quickstart", "tensorboard"))
        check(any(e.startswith("events.out.tfevents.") for e in events),
              "the quick start wrote no TensorBoard events")

    def daemon(self, cmd):
        """ddprund: started on a port of the OS's choosing; 'listening on'; SIGTERM -> exit 0."""
        port_file = os.path.join(TMP, "ddprund%d.port" % len(self.daemons))
        argv = shlex.split(cmd.replace("/run/ddprund.port", port_file))
        documented = 29400
        if "--port" in argv:
            i = argv.index("--port")
            documented = int(argv[i + 1])
            argv[i + 1] = "0"
        else:
            argv += ["--port", "0"]
        if "--port-file" not in argv:
            argv += ["--port-file", port_file]
        self.log("$ %s   (as: %s)" % (cmd, " ".join(argv)))
        log = open(os.path.join(TMP, "ddprund%d.log" % len(self.daemons)), "w")
        p = subprocess.Popen([os.path.join(BIN, argv[0])] + argv[1:], env=self.env, stdout=log,
                             stderr=subprocess.STDOUT)
        self.daemons.append(p)
        deadline = time.monotonic() + 30
        while not (os.path.exists(port_file) and open(port_file).read().strip()):
            check(p.poll() is None, "%s exited %s" % (cmd, p.returncode))
            check(time.monotonic() < deadline, "%s wrote no port file" % cmd)
            time.sleep(0.02)
        self.ports.setdefault(documented, int(open(port_file).read()))

    def static_pair(self, cmd):
        port = free_port()
        cmd = cmd.replace("--master-addr=10.0.0.1", "--master-addr=127.0.0.1")
        cmd = re.sub(r"--master-port=\d+", "--master-port=%d" % port, cmd)
        procs = []
        for rank in (0, 1):
            one = cmd.replace("--node-rank=0", "--node-rank=%d" % rank)
            out = open(os.path.join(TMP, "static%d.log" % rank), "w")
            self.log("$ " + one)
            procs.append(subprocess.Popen(["bash", "-c", one], cwd=SRC, env=self.env, stdout=out,
                                          stderr=subprocess.STDOUT, start_new_session=True))
        for rank, p in enumerate(procs):
            try:
                rc = p.wait(timeout=TIMEOUT_S)
            except subprocess.TimeoutExpired:
                for q in procs:
                    os.killpg(q.pid, signal.SIGKILL)
                raise TestFailure("static node %d still running after %d s" % (rank, TIMEOUT_S))
            check(rc == 0, "static node %d exited %d:\n%s" %
                  (rank, rc, open(os.path.join(TMP, "static%d.log" % rank)).read()[-3000:]))

    def sbatch(self, cmd):
        """The template as shipped; `sbatch --wait` exits with the batch job's own exit code."""
        log = os.path.join(TMP, "sbatch-%j.out")
        self.run(cmd.replace("sbatch ", "sbatch --wait --output=%s " % log, 1))
        outs = [os.path.join(TMP, n) for n in os.listdir(TMP) if n.startswith("sbatch-")]
        check(len(outs) == 1, "sbatch wrote %d output files" % len(outs))
        text = open(outs[0], errors="replace").read()
        check("FAILED" not in text, "the batch job reports a failure:\n" + text[-4000:])

    def expect_root_cause(self, cmd):
        text = self.run(cmd, expect=1)
        root = text[text.index("Root Cause"):]
        check(re.search(r"rank\s*: 1 \(local_rank: 1\)", root), "root cause not rank 1:\n" + root)

    def stop(self):
        for p in self.daemons:
            if p.poll() is None:
                p.send_signal(signal.SIGTERM)
        for p in self.daemons:
            try:
                rc = p.wait(timeout=10)
            except subprocess.TimeoutExpired:
                p.kill()
                p.wait()
                rc = -9
            check(rc == 0, "ddprund exited %s after SIGTERM" % rc)
        self.daemons = []


def clear_scratch():
    for root, dirs, files in os.walk(TMP, topdown=False):
        for n in files:
            os.unlink(os.path.join(root, n))
        for n in dirs:
            path = os.path.join(root, n)
            os.unlink(path) if os.path.islink(path) else os.rmdir(path)


def main():
    mode = sys.argv[1]
    clear_scratch()
    runner = Runner(mode)
    ran, skipped = 0, []
    try:
        plan = classify(readme_commands())
        for cmd, action, detail in plan:
            if action == "skip":
                skipped.append((cmd, detail))
            elif action in ("slurm", "sbatch") and mode == "local":
                skipped.append((cmd, "needs Slurm: run by integration_readme_examples_slurm_test"))
            elif (action in ("slurm", "sbatch")) != (mode == "slurm") and action != "quickstart":
                continue
            elif action == "quickstart" and mode == "slurm":
                if not os.path.exists(os.path.join(SRC, "build", "quickstart", "data")):
                    runner.quickstart(cmd)
            else:
                {"quickstart": runner.quickstart, "daemon": runner.daemon,
                 "static_pair": runner.static_pair, "expect_root_cause": runner.expect_root_cause,
                 "run": lambda c: runner.run(runner.substitute(c)),
                 "slurm": runner.run, "sbatch": runner.sbatch}[action](cmd)
                ran += 1
        runner.stop()
        for cmd, why in skipped:
            print("SKIP (%s): %s" % (why, cmd))
        check(ran > 0, "nothing ran")
        print("PASS: %d commands of README.md and docs/ ran, %d skipped with a reason" % (ran, len(skipped)))
        return 0
    except TestFailure as e:
        print("FAIL: %s" % e)
        return 1
    finally:
        for p in runner.daemons:
            p.kill()
            p.wait()


if __name__ == "__main__":
    sys.exit(main())
