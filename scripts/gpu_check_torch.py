"""gpu_check.sh's PyTorch rows, against the machine's torch (2.11 on the GPU machine, Debian's 1.13 on
a development box). Each check prints one last line, `PASS: ...`, `FAIL: ...` or `SKIPPED: ...`,
and exits 0, 1 or 77.

  gpu_check_torch.py in-place --bin DIR --worker gpu_torch_in_place.py --backend gloo|nccl
                     [--nproc N] [--steps N]
      a fault-free 1xN job, then the same job with one worker SIGKILLed mid-run, both under
      `ddprun --restart-scope=failed`: the kill is replaced in place (no full restart), the
      survivors keep their pids, the final parameter and optimizer CRCs equal the fault-free
      run's. nccl needs a GPU per rank: SKIPPED below N GPUs.
  gpu_check_torch.py store --bin DIR [--libuv]
      torch's TCPStore client (is_master=False; --libuv: use_libuv=True, SKIPPED where this torch
      has no such argument) against ddprund: set/get/num_keys/add/compare_set/wait (a key set later by another
      client; a wait that times out)/delete_key, and check/append/multi_get/multi_set where this
      torch has them.
  gpu_check_torch.py torchrun --bin DIR
      two torchrun agents (python -m torch.distributed.run, 1 worker each) on loopback with ddprund
      as their c10d endpoint (is_host=false) run a tiny gloo DDP script to its end.
  gpu_check_torch.py ddp-worker
      that script (what torchrun starts).

--bin DIR holds ddprun and ddprund (the bundle's bin/; ddprun finds the ddprun package in
DIR/../python). They run with LD_LIBRARY_PATH=$GPU_CHECK_BIN_LD when that is set (the bundle's
libraries), Python and torch with this process's LD_LIBRARY_PATH (torch's own). Every process started here runs in a session of its own and is stopped by pid (its
process group), also when this script gets SIGTERM (gpu_check.sh's `timeout`). Scratch space:
$TMPDIR. --timeout bounds a whole check (default $GPU_CHECK_TIMEOUT_S, else 120 s)."""
import argparse
import glob
import os
import re
import shlex
import signal
import subprocess
import sys
import tempfile
import threading
import time
import uuid
import zlib
from datetime import timedelta

SKIP = 77
_children = []


class Outcome(Exception):
    """The check's verdict: its line and exit code."""

    def __init__(self, word, line, code):
        super().__init__("%s: %s" % (word, line))
        self.code = code


def fail(line):
    raise Outcome("FAIL", line, 1)


def skip(line):
    raise Outcome("SKIPPED", line, SKIP)


def check(cond, line):
    if not cond:
        fail(line)


# -- processes -----------------------------------------------------------------------------------
def bin_env(env=None):
    """The environment of a bundle program (ddprun, ddprund): the bundle's libraries."""
    env = dict(env if env is not None else os.environ)
    if "GPU_CHECK_BIN_LD" in os.environ:
        env["LD_LIBRARY_PATH"] = os.environ["GPU_CHECK_BIN_LD"]
    return env


def python_exec(work):
    """What ddprun starts its Python workers with: this interpreter, with this process's
    LD_LIBRARY_PATH again (ddprun's own is the bundle's). Named python3, as ddprun expects."""
    if "GPU_CHECK_BIN_LD" not in os.environ:
        return sys.executable
    path = os.path.join(work, "python3")
    ld = os.environ.get("LD_LIBRARY_PATH")
    with open(path, "w") as f:
        f.write("#!/bin/sh\n%s\nexec %s \"$@\"\n" % (
            "export LD_LIBRARY_PATH=" + shlex.quote(ld) if ld else "unset LD_LIBRARY_PATH",
            shlex.quote(sys.executable)))
    os.chmod(path, 0o755)
    return path


def spawn(argv, log, env=None):
    """A child in its own session (its descendants share its process group), output to `log`."""
    out = open(log, "wb")
    p = subprocess.Popen(argv, stdout=out, stderr=subprocess.STDOUT, env=env, start_new_session=True)
    out.close()
    _children.append(p)
    return p


def stop_all():
    for p in _children:
        if p.poll() is None:
            try:
                os.killpg(p.pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
            p.wait()


def wait_for(what, cond, timeout, interval=0.01, watch=()):
    """Polls cond() until it returns something true; fails after `timeout` s or when a process of
    `watch` exits first."""
    deadline = time.monotonic() + timeout
    while True:
        got = cond()
        if got:
            return got
        for p, log in watch:
            if p.poll() is not None:
                fail("%s: %s exited with %s first: %s" % (what, os.path.basename(p.args[0]),
                                                        p.returncode, tail(log)))
        if time.monotonic() > deadline:
            fail("no %s within %.0f s" % (what, timeout))
        time.sleep(interval)


def tail(path, n=300):
    """The first error line of a log, else its end, on one line."""
    try:
        text = open(path, errors="replace").read()
    except OSError:
        return "(no log)"
    for line in text.splitlines():
        if re.search(r"error|exception|fail", line, re.I):
            return line.strip()[:n]
    return " / ".join(text.strip().splitlines()[-3:])[-n:]


def ddprund(bin_dir, work):
    """ddprund on a port of the OS's choosing; returns the port."""
    port_file = os.path.join(work, "ddprund.port")
    log = os.path.join(work, "ddprund.log")
    p = spawn([os.path.join(bin_dir, "ddprund"), "--host", "127.0.0.1", "--port", "0",
               "--port-file", port_file], log, bin_env())

    def port():
        try:
            text = open(port_file).read()
        except FileNotFoundError:
            return None
        return int(text) if text.endswith("\n") else None
    return wait_for("ddprund port file", port, 30, watch=[(p, log)])


def torch_version():
    import torch
    return "torch " + torch.__version__.split("+")[0]


# -- in-place ------------------------------------------------------------------------------------
class Job:
    """`ddprun --standalone --restart-scope=failed` of N gpu_torch_in_place.py workers."""

    def __init__(self, a, work, tag):
        self.out = os.path.join(work, tag)
        os.makedirs(self.out)
        self.log = os.path.join(work, tag + ".log")
        env = bin_env(dict(os.environ, PYTHON_EXEC=python_exec(work), DDP_NO_SLURM="1"))
        argv = [os.path.join(a.bin, "ddprun"), "--standalone", "--nproc-per-node", str(a.nproc),
                "--restart-scope=failed", "--max-restarts", "3", "--shutdown-timeout", "5",
                a.worker, "--out", self.out, "--backend", a.backend, "--steps", str(a.steps)]
        self.steps = a.steps
        self.agent = spawn(argv, self.log, env)

    def progress(self):
        """{pid: (last step, rank)} of every process that stepped."""
        seen = {}
        for path in glob.glob(os.path.join(self.out, "steps.*.log")):
            text = open(path).read()
            lines = text[:text.rfind("\n") + 1].splitlines()  # complete lines only
            if lines:
                step, rank, _, pid = map(int, lines[-1].split())
                seen[pid] = (step, rank)
        return seen

    def finish(self, timeout):
        try:
            rc = self.agent.wait(timeout=timeout)
        except subprocess.TimeoutExpired:
            fail("%s: ddprun still running after %.0f s (last steps %s)"
                 % (os.path.basename(self.out), timeout, sorted(self.progress().values())))
        check(rc == 0, "%s: ddprun exited %s: %s" % (os.path.basename(self.out), rc, tail(self.log)))
        finals = {}
        for path in glob.glob(os.path.join(self.out, "final.*")):
            m = re.match(r"pid (\d+) step (\d+) params (\w+) optim (\w+)", open(path).read())
            check(m, "bad final line in %s" % path)
            finals[int(path.rsplit(".", 1)[1])] = (int(m.group(1)), int(m.group(2)), m.group(3), m.group(4))
        return finals

    def output(self):
        return open(self.log, errors="replace").read()


def in_place(a):
    """Row a/b: one worker SIGKILLed mid-run is replaced in place, bit-identical."""
    if a.backend == "nccl":
        import torch
        gpus = torch.cuda.device_count() if torch.cuda.is_available() else 0
        if gpus < a.nproc:
            skip("needs %d GPUs, this machine has %d" % (a.nproc, gpus))
    work = tempfile.mkdtemp(prefix="gpu_check_in_place_")
    deadline = time.monotonic() + a.timeout
    left = lambda: max(1.0, deadline - time.monotonic())  # noqa: E731
    ref = Job(a, work, "fault_free")
    finals = ref.finish(left())
    check(sorted(finals) == list(range(a.nproc)), "fault-free run: final lines of ranks %s"
          % sorted(finals))
    want = {f[2:] for f in finals.values()}
    check(len(want) == 1, "fault-free run: ranks ended with different states %s" % finals)
    want = want.pop()

    job = Job(a, work, "killed")
    kill_at = max(5, a.steps // 8)
    seen = wait_for("step %d" % kill_at, lambda: (lambda s: s if len(s) == a.nproc and
                    min(v[0] for v in s.values()) >= kill_at else None)(job.progress()),
                    left(), interval=0.002, watch=[(job.agent, job.log)])
    victim = max(seen, key=lambda pid: seen[pid][1])  # the highest rank
    os.kill(victim, signal.SIGKILL)
    killed_at = seen[victim][0]
    check(killed_at < a.steps, "the job ended before the kill (step %d of %d)" % (killed_at, a.steps))
    finals = job.finish(left())
    out = job.output()
    check("restarting the job" not in out, "a full restart instead of in place: %s"
          % tail(job.log))
    check("replacing in place" in out, "ddprun did not replace pid %d in place: %s"
          % (victim, tail(job.log)))
    check(sorted(finals) == list(range(a.nproc)), "final lines of ranks %s" % sorted(finals))
    survivors = set(seen) - {victim}
    kept = survivors & {f[0] for f in finals.values()}
    check(kept == survivors, "survivors %s lost their processes (finished: %s)"
          % (sorted(survivors - kept), sorted(f[0] for f in finals.values())))
    got = {f[2:] for f in finals.values()}
    check(got == {want}, "params/optim %s differ from the fault-free run's %s"
          % (sorted(got), want))
    return ("1x%d %s, %s: pid %d (rank %d) SIGKILLed at step %d of %d, replaced in place; "
            "survivor pid%s %s kept; params %s optim %s = fault-free"
            % (a.nproc, a.backend, torch_version(), victim, seen[victim][1], killed_at, a.steps,
               "s" if len(kept) > 1 else "", ",".join(map(str, sorted(kept))), want[0], want[1]))


# -- store ---------------------------------------------------------------------------------------
def store(a):
    """Row c: torch's TCPStore client against ddprund."""
    from torch.distributed import TCPStore
    work = tempfile.mkdtemp(prefix="gpu_check_store_")
    port = ddprund(a.bin, work)
    kwargs = {"use_libuv": True} if a.libuv else {}

    def client():
        return TCPStore("127.0.0.1", port, is_master=False, timeout=timedelta(seconds=30), **kwargs)
    if a.libuv and "use_libuv" not in (TCPStore.__init__.__doc__ or ""):
        skip("%s's TCPStore has no use_libuv argument" % torch_version())
    s = client()
    ops = ["set"]

    def expect(op, got, want):
        check(got == want, "%s: got %r, wanted %r" % (op, got, want))
        if op.split()[0] not in ops:
            ops.append(op.split()[0])
    run = uuid.uuid4().hex[:8]
    k = lambda name: "gpu_check/%s/%s" % (run, name)  # noqa: E731
    keys0 = s.num_keys()
    s.set(k("a"), "1")
    expect("get", s.get(k("a")), b"1")
    expect("num_keys", s.num_keys() - keys0, 1)
    expect("add", s.add(k("n"), 5), 5)
    expect("add", s.add(k("n"), -7), -2)
    expect("compare_set creating", s.compare_set(k("c"), "", "x"), b"x")
    expect("compare_set mismatch", s.compare_set(k("c"), "y", "z"), b"x")
    expect("compare_set swap", s.compare_set(k("c"), "x", "z"), b"z")
    has_check = hasattr(s, "check")  # torch >= 2.0 binds it
    if has_check:
        expect("check", s.check([k("a"), k("c")]), True)
        expect("check missing", s.check([k("missing")]), False)
    other = client()
    setter = threading.Thread(target=lambda: other.set(k("late"), "here"))
    setter.start()
    s.wait([k("late"), k("a")], timedelta(seconds=30))
    setter.join()
    expect("wait", s.get(k("late")), b"here")
    t0 = time.monotonic()
    try:
        s.wait([k("never")], timedelta(milliseconds=300))
        fail("wait on a missing key returned")
    except RuntimeError as e:  # DistStoreError (2.x) is a RuntimeError
        check("timeout" in str(e).lower() or "timed out" in str(e).lower(),
              "wait timeout: unexpected error %s" % str(e).splitlines()[0])
    check(time.monotonic() - t0 < 20, "a 300 ms wait took %.1f s" % (time.monotonic() - t0))
    expect("delete_key", s.delete_key(k("a")), True)
    expect("delete_key missing", s.delete_key(k("a")), False)
    if has_check:
        expect("check after delete", s.check([k("a")]), False)
    if hasattr(s, "append"):
        s.append(k("log"), "ab")
        s.append(k("log"), "cd")
        expect("append", s.get(k("log")), b"abcd")
    if hasattr(s, "multi_set") and hasattr(s, "multi_get"):
        s.multi_set([k("m1"), k("m2")], ["v1", "v2"])
        expect("multi_get", s.multi_get([k("m1"), k("m2")]), [b"v1", b"v2"])
        ops.append("multi_set")
    expect("get from a third client", client().get(k("c")), b"z")
    return "%s, %s client%s: %s" % (torch_version(), "use_libuv=True" if a.libuv else "default",
                                   " (libuv default)" if not a.libuv and _libuv_default() else "",
                                   "/".join(ops))


def _libuv_default():
    """Whether this torch's TCPStore uses libuv when not told (torch >= 2.4)."""
    from torch.distributed import TCPStore
    doc = TCPStore.__init__.__doc__ or ""
    m = re.search(r"use_libuv: bool = (True|False)", doc)
    return bool(m and m.group(1) == "True")


# -- torchrun ------------------------------------------------------------------------------------
def torchrun(a):
    """Row d: two torchrun agents with ddprund as their c10d endpoint run a DDP script."""
    work = tempfile.mkdtemp(prefix="gpu_check_torchrun_")
    port = ddprund(a.bin, work)
    run_id = "gpu-check-" + uuid.uuid4().hex[:12]
    env = dict(os.environ, GLOO_SOCKET_IFNAME="lo", OMP_NUM_THREADS="1")
    argv = [sys.executable, "-m", "torch.distributed.run", "--nnodes=2", "--nproc_per_node=1",
            "--rdzv_backend=c10d", "--rdzv_endpoint=127.0.0.1:%d" % port, "--rdzv_id=" + run_id,
            "--rdzv_conf", "is_host=false", "--max_restarts=0", "--monitor_interval=1",
            # workers' output teed ("[0]:..."): torch 1.13 on Python 3.11 fails without --redirects
            "--redirects=1", "--tee=1",
            os.path.abspath(__file__), "ddp-worker"]
    agents = [(spawn(argv, os.path.join(work, "agent%d.log" % i), env),
               os.path.join(work, "agent%d.log" % i)) for i in range(2)]
    deadline = time.monotonic() + a.timeout
    for i, (p, log) in enumerate(agents):
        try:
            rc = p.wait(timeout=max(1, deadline - time.monotonic()))
        except subprocess.TimeoutExpired:
            fail("torchrun agent %d still running after %.0f s: %s" % (i, a.timeout, tail(log)))
        check(rc == 0, "torchrun agent %d exited %s: %s" % (i, rc, tail(log)))
    seen = {}
    for _, log in agents:
        for m in re.finditer(r"DDP RANK (\d+) WORLD (\d+) STEPS (\d+) PARAMS (\w+)", open(log).read()):
            seen[int(m.group(1))] = (int(m.group(2)), int(m.group(3)), m.group(4))
    check(sorted(seen) == [0, 1], "ranks that finished: %s, wanted 0 and 1" % sorted(seen))
    check({v[0] for v in seen.values()} == {2}, "world sizes %s" % seen)
    check(len({v[2] for v in seen.values()}) == 1, "ranks ended with different parameters %s" % seen)
    closed = [l for l in open(os.path.join(work, "ddprund.log"), errors="replace")
              if "closing connection" in l]
    check(not closed, "ddprund closed a torchrun connection: %s" % (closed[:1] or [""])[0].strip())
    return ("%s: 2 agents (c10d, endpoint ddprund, is_host=false), ranks 0-1 of world 2 ran %d "
            "DDP steps, params %s on both" % (torch_version(), seen[0][1], seen[0][2]))


def ddp_worker():
    """What torchrun starts: a few gloo DDP steps; prints rank, world and a CRC of the parameters."""
    import torch
    import torch.distributed as dist
    from torch.nn.parallel import DistributedDataParallel
    dist.init_process_group("gloo", timeout=timedelta(seconds=60))
    torch.manual_seed(0)
    net = torch.nn.Linear(8, 2)
    model = DistributedDataParallel(net)
    opt = torch.optim.SGD(net.parameters(), lr=0.1)
    rank, world, steps = dist.get_rank(), dist.get_world_size(), 5
    gen = torch.Generator()
    gen.manual_seed(rank)
    for _ in range(steps):
        loss = model(torch.randn(4, 8, generator=gen)).square().mean()
        opt.zero_grad()
        loss.backward()
        opt.step()
    crc = zlib.crc32(b"".join(t.detach().numpy().tobytes() for t in net.parameters()))
    print("DDP RANK %d WORLD %d STEPS %d PARAMS %08x" % (rank, world, steps, crc), flush=True)
    dist.destroy_process_group()


# -- main ----------------------------------------------------------------------------------------
def main():
    timeout = float(os.environ.get("GPU_CHECK_TIMEOUT_S", "120"))  # gpu_check.sh: the step's budget
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    sub = p.add_subparsers(dest="check", required=True)
    ip = sub.add_parser("in-place")
    ip.add_argument("--bin", required=True)
    ip.add_argument("--worker", required=True)
    ip.add_argument("--backend", default="gloo", choices=("gloo", "nccl"))
    ip.add_argument("--nproc", type=int, default=2)
    ip.add_argument("--steps", type=int, default=400)
    ip.add_argument("--timeout", type=float, default=timeout, help="for the whole check, s")
    st = sub.add_parser("store")
    st.add_argument("--bin", required=True)
    st.add_argument("--libuv", action="store_true")
    tr = sub.add_parser("torchrun")
    tr.add_argument("--bin", required=True)
    tr.add_argument("--timeout", type=float, default=timeout, help="for the whole check, s")
    sub.add_parser("ddp-worker")
    a = p.parse_args()
    if a.check == "ddp-worker":
        return ddp_worker()
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(143))  # `timeout`: stop the children first
    try:
        line = {"in-place": in_place, "store": store, "torchrun": torchrun}[a.check](a)
        print("PASS: " + line, flush=True)
        code = 0
    except Outcome as o:
        print(str(o), flush=True)
        code = o.code
    except Exception as e:  # noqa: BLE001 (torch raises many kinds; the row wants one line)
        print("FAIL: %s: %s" % (type(e).__name__, (str(e).strip().splitlines() or [""])[0]), flush=True)
        code = 1
    finally:
        stop_all()
    sys.exit(code)


if __name__ == "__main__":
    main()
