"""ddprun at a terminal, as torchrun behaves there (issue 30, items 1 and 2): each scenario runs
ddprun in a real pseudo-terminal whose foreground it is (pty.fork: a session of its own), types
into it and reads the screen as a person would.

  terminal_test.py pdb        rank 0's breakpoint() shows "(Pdb) " and reads "p x * 7" and "c"
                              while rank 1 keeps printing: rank 1's lines never land inside rank
                              0's line, and the prompt is shown again under them
  terminal_test.py input      input("name? ") shows its prompt (no newline) and reads the answer
  terminal_test.py tdbreak    torch.distributed.breakpoint() where torch has it (2.2+), else skipped
  terminal_test.py progress   "\\r" updates without a newline reach the screen, each one before the
                              worker writes the next (it waits for the test to have seen it), with
                              the rank prefix after each "\\r"
  terminal_test.py crash      a C++ worker printf()s a line and aborts: the line is on the screen
                              and in its --tee log (stdio line-buffers a terminal)
  terminal_test.py crash_py   the same with `--no-python python3` without -u (PYTHONUNBUFFERED
                              unset)
  terminal_test.py binary     bytes 0..255 on stdout reach the --tee log byte for byte
  terminal_test.py flood      32 MiB without a newline and 200,000 "\\r" updates pass through; ddprun's
                              peak memory stays under 64 MiB (partial lines go on in pieces)
  terminal_test.py sigint     Ctrl-C reaches each worker once; ddprun exits 130
  terminal_test.py kill9      kill -9 of ddprun at a terminal leaves no worker nor its child
  terminal_test.py hangup     the terminal closed under a job: ddprun and its workers end (SIGHUP);
                              under nohup the job runs on and exits 0

Order is shown by events (the test makes a file a worker waits for once it saw what came before),
never by timestamps; every wait is bounded.
"""
import errno
import os
import pty
import re
import select
import shutil
import signal
import sys
import time

sys.dont_write_bytecode = True
BIN = os.environ["DDP_BIN_DIR"]
SRC = os.environ["DDP_SOURCE_DIR"]
TMP = os.environ["DDP_TEST_TMP"]
DDPRUN = os.path.join(BIN, "ddprun")
WORKER = os.path.join(SRC, "tests", "launcher", "workers", "terminal_worker.py")
TEST_WORKER = os.path.join(BIN, "ddp_test_worker")
PY = "/usr/bin/python3"
sys.path.insert(0, os.path.join(SRC, "tests", "integration"))
from multinode_harness import TestFailure, alive, check  # noqa: E402



class Terminal:
    """A command in a pseudo-terminal of its own: screen text read as it comes, keys typed."""

    def __init__(self, argv, env=None, cwd=None):
        self.pid, self.fd = pty.fork()
        if self.pid == 0:  # the child: a session leader whose controlling terminal is the pty
            try:
                if cwd:
                    os.chdir(cwd)
                os.execve(argv[0], argv, env or os.environ)
            finally:
                os._exit(127)
        self.screen = b""
        self.status = None
        self.hung_up = False

    def pump(self, timeout):
        """Reads what the screen shows within `timeout` s; False when nothing came."""
        if self.hung_up:
            time.sleep(timeout)
            return False
        ready, _, _ = select.select([self.fd], [], [], timeout)
        if not ready:
            return False
        try:
            data = os.read(self.fd, 65536)
        except OSError as e:
            if e.errno != errno.EIO:
                raise
            data = b""
        if not data:  # no process holds the terminal any more (it exited, or nohup let it go)
            self.hung_up = True
            return False
        self.screen += data
        return True

    def expect(self, pattern, timeout=60, start=0):
        """Waits until `pattern` (bytes regex) is on the screen after offset `start`."""
        deadline = time.monotonic() + timeout
        while True:
            m = re.search(pattern, self.screen[start:])
            if m:
                return start + m.end()
            if self.reap() is not None and not self.pump(0.05):
                raise TestFailure("ddprun ended (status %s) before %r showed:\n%s"
                                  % (self.status, pattern, self.text()))
            left = deadline - time.monotonic()
            if left <= 0:
                raise TestFailure("%r never showed within %d s:\n%s"
                                  % (pattern, timeout, self.text()))
            self.pump(min(left, 0.5))

    def type(self, keys):
        os.write(self.fd, keys)

    def reap(self, block=False):
        if self.status is None:
            pid, status = os.waitpid(self.pid, 0 if block else os.WNOHANG)
            if pid:
                self.status = status
        return self.status

    def wait(self, timeout=60):
        """Reads the screen until the command exits; returns its exit code (128 + S for signal S)."""
        deadline = time.monotonic() + timeout
        while self.reap() is None:
            if time.monotonic() > deadline:
                raise TestFailure("ddprun still runs after %d s:\n%s" % (timeout, self.text()))
            self.pump(0.2)
        while self.pump(0.05):
            pass
        return os.waitstatus_to_exitcode(self.status) if os.WIFEXITED(self.status) \
            else 128 + os.WTERMSIG(self.status)

    def close(self):
        if self.status is None:
            try:
                os.kill(self.pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
            self.reap(block=True)
        try:
            os.close(self.fd)
        except OSError:
            pass

    def text(self):
        return self.screen.decode("utf-8", "replace")


def ddprun(*args, nproc=2):
    return [DDPRUN, "--standalone", "--nproc-per-node=%d" % nproc] + list(args)


def scratch(name):
    path = os.path.join(TMP, name)
    shutil.rmtree(path, ignore_errors=True)
    os.makedirs(path)
    return path


def touch(path):
    open(path, "w").close()


def lines(screen):
    """Screen lines as a person reads them: split at '\\n', each line's last '\\r' part."""
    return [l.split("\r")[-1] for l in screen.replace("\r\n", "\n").split("\n")]


def await_gone(pids, what, timeout=20):
    deadline = time.monotonic() + timeout
    while any(alive(p) for p in pids):
        if time.monotonic() > deadline:
            raise TestFailure("%s still running %d s later: %s"
                              % (what, timeout, [p for p in pids if alive(p)]))
        time.sleep(0.05)


def scenario_pdb(t, d):
    at = t.expect(rb"\[default0\]:\(Pdb\) ")
    # rank 1 prints while rank 0 waits at the prompt; its lines start lines of their own
    at = t.expect(rb"rank1 tick \d+\r?\n(.*\r?\n)?.*rank1 tick \d+", start=at)
    t.type(b"p x * 7\n")
    at = t.expect(rb"\n\[default0\]:42\r?\n", start=at)
    t.type(b"c\n")
    t.expect(rb"\[default0\]:after pdb x=6", start=at)
    touch(os.path.join(d, "done"))
    rc = t.wait()
    check(rc == 0, "the job exited %d:\n%s" % (rc, t.text()))
    for line in lines(t.text()):
        if "rank1 tick" in line:
            check(line.startswith("[default1]:rank1 tick"), "rank 1's line is cut: %r" % line)
        if "(Pdb)" in line:
            check(line.startswith("[default0]:(Pdb)"), "a prompt line not rank 0's: %r" % line)
    screen = t.text()
    first_tick = screen.find("rank1 tick", screen.find("(Pdb)"))
    check(screen.find("[default0]:(Pdb) ", first_tick) > 0,
          "the prompt is not shown again under rank 1's lines:\n" + screen)


def scenario_input(t, d):
    at = t.expect(rb"\[default0\]:name\? ")
    t.type(b"ddp\n")
    t.expect(rb"\[default0\]:hello ddp", start=at)
    rc = t.wait()
    check(rc == 0, "the job exited %d:\n%s" % (rc, t.text()))


def scenario_tdbreak(t, d):
    out = t.expect(rb"\(Pdb\) |has no torch.distributed.breakpoint")
    if b"has no torch.distributed.breakpoint" in t.screen:
        t.wait()
        print("skipped: " + re.search(r"torch \S+ has no [\w.]+", t.text()).group(0))
        return 77
    t.type(b"p x * 7\n")
    out = t.expect(rb"42", start=out)
    t.type(b"c\n")
    t.expect(rb"after dist.breakpoint rank 1", start=out)
    rc = t.wait()
    check(rc == 0, "the job exited %d:\n%s" % (rc, t.text()))


def scenario_progress(t, d):
    at = t.expect(rb"\[default0\]:progress 1")
    touch(os.path.join(d, "go2"))
    at = t.expect(rb"\r\[default0\]:progress 2", start=at)
    touch(os.path.join(d, "go3"))
    t.expect(rb"\r\[default0\]:progress 3", start=at)
    rc = t.wait()
    check(rc == 0, "the job exited %d:\n%s" % (rc, t.text()))


def scenario_crash(t, d):
    rc = t.wait()
    check(rc == 134, "want the abort's 134, have %d:\n%s" % (rc, t.text()))
    check("[default0]:last words" in t.text(), "the last line is not on the screen:\n" + t.text())
    logs = [os.path.join(r, f) for r, _, fs in os.walk(d) for f in fs if f == "stdout.log"]
    check(len(logs) == 1, "want one stdout.log under %s, have %s" % (d, logs))
    for log in logs:
        check(open(log).read() == "last words\n", "%s holds %r" % (log, open(log).read()))


def scenario_binary(t, d):
    rc = t.wait()
    check(rc == 0, "the job exited %d:\n%s" % (rc, t.text()))
    logs = [os.path.join(r, f) for r, _, fs in os.walk(d) for f in fs
            if f == "stdout.log" and "/0/" in os.path.join(r, f) + "/"]
    want = bytes(range(256)) * 16 + b"\n"
    for log in logs:
        if os.path.getsize(log) > 0:
            got = open(log, "rb").read()
            check(got == want, "%s differs from what rank 0 wrote (%d bytes of %d)"
                  % (log, len(got), len(want)))
            return
    raise TestFailure("no rank-0 stdout.log with output under %s" % d)


def scenario_flood(t, d):
    tail, total = b"", 0
    deadline = time.monotonic() + 120
    while b"flood done" not in tail:
        check(time.monotonic() < deadline, "the flood never ended: ...%r" % tail[-200:])
        check(t.reap() is None or t.pump(0.05), "ddprun ended during the flood")
        ready, _, _ = select.select([t.fd], [], [], 0.5)
        if ready:
            data = os.read(t.fd, 1 << 20)
            total += len(data)
            tail = (tail + data)[-4096:]
    with open("/proc/%d/status" % t.pid) as f:
        peak_kib = int(re.search(r"VmHWM:\s+(\d+) kB", f.read()).group(1))
    touch(os.path.join(d, "done"))
    rc = t.wait()
    check(rc == 0, "the job exited %d" % rc)
    check(total > 32 << 20, "only %d bytes reached the screen" % total)
    check(peak_kib < 64 << 10, "ddprun's peak RSS %d KiB while passing %d bytes on"
          % (peak_kib, total))


def scenario_sigint(t, d):
    for r in (0, 1):
        deadline = time.monotonic() + 60
        while not os.path.exists(os.path.join(d, "pid%d" % r)):
            check(time.monotonic() < deadline, "worker %d never started:\n%s" % (r, t.text()))
            t.pump(0.05)
    t.type(b"\x03")
    t.expect(rb"received SIGINT; the workers got it from the terminal too")
    touch(os.path.join(d, "done"))
    rc = t.wait()
    check(rc == 130, "want 130 after Ctrl-C, have %d:\n%s" % (rc, t.text()))
    for r in (0, 1):
        count = open(os.path.join(d, "count%d" % r)).read()
        check(count == "1", "worker %d got SIGINT %s times, want once" % (r, count))


def read_pids(t, d, names):
    deadline = time.monotonic() + 60
    pids = []
    for name in names:
        path = os.path.join(d, name)
        while not (os.path.exists(path) and open(path).read().strip()):
            check(time.monotonic() < deadline, "%s never written:\n%s" % (name, t.text()))
            t.pump(0.05)
        pids.append(int(open(path).read()))
    return pids


def scenario_kill9(t, d):
    pids = read_pids(t, d, ["pid0", "pid1", "child0", "child1"])
    os.kill(t.pid, signal.SIGKILL)
    t.reap(block=True)
    await_gone(pids, "workers and their children after kill -9 of ddprun")


def scenario_hangup(t, d):
    pids = read_pids(t, d, ["pid0", "pid1"])
    os.close(t.fd)
    t.fd = -1
    t.reap(block=True)
    code = os.waitstatus_to_exitcode(t.status)
    check(code in (129, -signal.SIGHUP), "want ddprun ended by the hang-up, have %d" % code)
    await_gone(pids, "workers after the terminal closed")


def scenario_nohup(t, d):
    read_pids(t, d, ["pid0", "pid1"])
    os.close(t.fd)
    t.fd = -1
    touch(os.path.join(d, "done"))
    t.reap(block=True)
    code = os.waitstatus_to_exitcode(t.status)
    check(code == 130, "under nohup the job should run on to its own end (130), have %d" % code)


def main():
    name = sys.argv[1]
    d = scratch("terminal_" + name)
    env = dict(os.environ, DDP_NO_SLURM="1", TERM="xterm", PYTHONDONTWRITEBYTECODE="1",
               PYTHON_EXEC=PY)
    env.pop("PYTHONUNBUFFERED", None)  # the workers buffer as users' scripts do
    argv = {
        "pdb": ddprun(WORKER, "pdb", d),
        "input": ddprun(WORKER, "input", d),
        "tdbreak": ddprun(WORKER, "tdbreak", d),
        "progress": ddprun(WORKER, "progress", d),
        "crash": ddprun("--tee=3", "--log-dir", d, "--no-python", TEST_WORKER,
                        "--abort-after-print", "last words", nproc=1),
        "crash_py": ddprun("--tee=3", "--log-dir", d, "--no-python", PY, "-c",
                           "print('last words'); import os; os.abort()", nproc=1),
        "binary": ddprun("--tee=1", "--log-dir", d, WORKER, "binary", d),
        "flood": ddprun(WORKER, "flood", d),
        "sigint": ddprun(WORKER, "sigint", d),
        "kill9": ddprun("--no-python", "sh", "-c",
                        "echo $$ > %s/pid$RANK; sleep 300 & echo $! > %s/child$RANK; wait" % (d, d)),
        "hangup": ddprun(WORKER, "sigint", d),
        "nohup": ["/usr/bin/nohup"] + ddprun(WORKER, "sigint", d),
    }[name]
    t = Terminal(argv, env, cwd=d)
    try:
        rc = globals()["scenario_" + name.replace("crash_py", "crash")](t, d)
    except TestFailure as e:
        print("FAIL %s: %s" % (name, e))
        return 1
    finally:
        t.close()
    if rc == 77:
        return 77
    print("PASS " + name)
    return 0


if __name__ == "__main__":
    sys.exit(main())
