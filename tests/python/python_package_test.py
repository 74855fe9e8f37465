"""The ddprun Python package (docs/python.md): `python_package_test.py calls|pip|agent|installed`.

calls      the calls in fresh interpreters (PYTHONPATH = the source folder): `import ddprun`
           imports no torch and has ddprun's version (CMakeLists.txt project()); with torchrun's
           variables, or `env://`'s by hand, and a live TCPStore at MASTER_ADDR:MASTER_PORT,
           publish_point and report_progress do nothing (no key, no beat, no output); with
           DDP_AGENT_VERSION the point arrives in the store as `train` writes it (rank 0 only,
           at most one point per 200 ms) and a beat in DDP_PROGRESS_FILE's FIFO; an
           unreachable store or no torch: False and one line, never an exception.
pip        `pip install --no-build-isolation --no-deps --no-index` of a copy of
           worker_runtime/python into a fresh `python3 -m venv --system-site-packages`: that
           interpreter imports ddprun from its site-packages, every module of the source folder
           installed, without PYTHONPATH.
agent      build/bin/ddprun: --dry-run shows python_path = build/python; a 2-worker job's workers
           import ddprun from build/python (the source folder behind it) with nothing but the
           agent's PYTHONPATH, the user's PYTHONPATH after it, DDP_AGENT_VERSION set.
installed  `cmake --install --component python` into a prefix and ddprun copied to <prefix>/bin:
           its workers import <prefix>/lib/ddprun/python/ddprun (no __pycache__ installed); a ddprun
           with no package beside it leaves PYTHONPATH as the user's and python_path "".

Every process started here is waited for, or its process group killed, by pid.
"""
import datetime
import json
import os
import re
import shutil
import signal
import socket
import subprocess
import sys
import time

BIN = os.environ["DDP_BIN_DIR"]
SRC = os.environ["DDP_SOURCE_DIR"]
TMP = os.environ["DDP_TEST_TMP"]
BUILD = os.path.dirname(BIN)
PY = "/usr/bin/python3"
PKG_SRC = os.path.join(SRC, "worker_runtime", "python")
DEBIAN_PATH = "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"


class TestFailure(Exception):
    pass


def check(cond, what):
    if not cond:
        raise TestFailure(what)


def base_env(**extra):
    """A plain environment: no launcher's variables, Debian's python3 first."""
    env = {"PATH": DEBIAN_PATH, "HOME": os.environ.get("HOME", "/root"), "TMPDIR": TMP,
           "LANG": "C.UTF-8"}
    env.update(extra)
    return env


def run(argv, env, timeout=120, cwd=TMP):
    """Runs argv in its own session; kills its process group if it outlives `timeout` s."""
    proc = subprocess.Popen(argv, env=env, cwd=cwd, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                            text=True, start_new_session=True)
    try:
        out, err = proc.communicate(timeout=timeout)
    except subprocess.TimeoutExpired:
        os.killpg(proc.pid, signal.SIGKILL)
        out, err = proc.communicate()
        raise TestFailure("%s ran past %d s\n%s%s" % (argv, timeout, out, err))
    return proc.returncode, out, err


def py(code, timeout=120, **env):
    """Runs `code` in a fresh /usr/bin/python3 with the source folder on PYTHONPATH (unless `env`
    names one); returns its stdout's last line as JSON, and its stderr."""
    env.setdefault("PYTHONPATH", PKG_SRC)
    rc, out, err = run([PY, "-c", code], base_env(**env), timeout)
    check(rc == 0, "python exited %d:\n%s%s" % (rc, out, err))
    return json.loads(out.strip().splitlines()[-1]), err


def cmake_version():
    text = open(os.path.join(SRC, "CMakeLists.txt")).read()
    return re.search(r"project\(ddprun VERSION ([0-9.]+)", text).group(1)


# -- calls --

def check_import():
    got, _ = py("import json, sys, ddprun\n"
                "torch = sorted(m for m in sys.modules if m.split('.')[0] == 'torch')\n"
                "print(json.dumps([torch, ddprun.__version__, callable(ddprun.report_progress),"
                " callable(ddprun.publish_point)]))")
    check(got[0] == [], "import ddprun imported %s" % got[0])
    check(got[1] == cmake_version(),
          "ddprun.__version__ %s, ddprun's %s" % (got[1], cmake_version()))
    check(got[2] and got[3], "ddprun exports report_progress and publish_point")


def launcher_env(port, rank=0, **extra):
    env = {"RANK": str(rank), "LOCAL_RANK": str(rank), "WORLD_SIZE": "2",
           "MASTER_ADDR": "127.0.0.1", "MASTER_PORT": str(port)}
    env.update(extra)
    return env


TORCHRUN = {"TORCHELASTIC_RUN_ID": "job", "TORCHELASTIC_RESTART_COUNT": "0",
            "TORCHELASTIC_MAX_RESTARTS": "0", "TORCHELASTIC_USE_AGENT_STORE": "True",
            "GROUP_RANK": "0", "LOCAL_WORLD_SIZE": "2", "ROLE_RANK": "0", "ROLE_NAME": "default"}
CALLS = ("import json, ddprun\n"
         "print(json.dumps([ddprun.publish_point(5, loss=1.5, samples_per_s=200.0, epoch=1,"
         " lr=0.1),"
         " ddprun.report_progress(5, compute_s=0.25)]))")
# 50 calls as fast as they go: at most one point per 200 ms is sent, whatever the machine's load.
RATE = ("import json, time, ddprun\n"
        "t0 = time.monotonic(); sent = sum(ddprun.publish_point(s) for s in range(50))\n"
        "print(json.dumps([sent, time.monotonic() - t0]))")


def check_points():
    import torch.distributed as dist
    server = dist.TCPStore("127.0.0.1", 0, 1, True, datetime.timedelta(seconds=10),
                           wait_for_workers=False)
    keys = server.num_keys()
    for name, extra in (("torchrun", TORCHRUN), ("env:// by hand", {})):
        got, err = py(CALLS, **launcher_env(server.port, **extra))
        check(got == [False, None] and err == "",
              "under %s the calls did nothing: %s %r" % (name, got, err))
        check(server.num_keys() == keys, "under %s no key was written (%d keys, were %d)" %
              (name, server.num_keys(), keys))
    got, err = py(CALLS, **launcher_env(server.port, DDP_AGENT_VERSION=cmake_version(), **TORCHRUN))
    check(got == [True, None] and err == "", "under ddprun the point is sent: %s %r" % (got, err))
    check(server.get("ddp/metrics/n") == b"1", "the counter: %r" % server.get("ddp/metrics/n"))
    point = json.loads(server.get("ddp/metrics/1"))
    check(abs(point.pop("time") - time.time()) < 600, "a wall-clock time")
    check(point == {"n": 1, "step": 5, "loss": 1.5, "samples_per_s": 200.0, "epoch": 1, "lr": 0.1},
          "the point as train writes it: %s" % point)
    (sent, elapsed), _ = py(RATE, **launcher_env(server.port, DDP_AGENT_VERSION="x"))
    check(1 <= sent <= 1 + elapsed / 0.2, "%d of 50 points sent in %.3f s" % (sent, elapsed))
    check(server.get("ddp/metrics/n") == str(1 + sent).encode(), "the counter counts them")
    keys = server.num_keys()
    got, err = py(CALLS, **launcher_env(server.port, rank=1, DDP_AGENT_VERSION="x"))
    check(got == [False, None] and server.num_keys() == keys, "rank 1 sends no point")


def check_beats():
    fifo = os.path.join(TMP, "progress.fifo")
    if os.path.exists(fifo):
        os.unlink(fifo)
    os.mkfifo(fifo)
    fd = os.open(fifo, os.O_RDONLY | os.O_NONBLOCK)
    try:
        py(CALLS, **launcher_env(1, **TORCHRUN))  # torchrun: no DDP_PROGRESS_FILE
        check(read_all(fd) == b"", "a beat without DDP_PROGRESS_FILE")
        py(CALLS, **launcher_env(1, DDP_PROGRESS_FILE=fifo))
        beat = json.loads(read_all(fd))
        check(beat["scope_id"] == "ddprun.progress" and beat["step"] == 5 and
              beat["compute_s"] == 0.25 and beat["expiration_time"] == -1,
              "the beat, torch's file-timer release of ddprun.progress: %s" % beat)
    finally:
        os.close(fd)
        os.unlink(fifo)


def read_all(fd):
    try:
        return os.read(fd, 65536)
    except BlockingIOError:
        return b""


def check_faults():
    closed = socket.socket()
    closed.bind(("127.0.0.1", 0))  # bound, never listening: connections are refused
    try:
        got, err = py(CALLS, **launcher_env(closed.getsockname()[1], DDP_AGENT_VERSION="x"))
    finally:
        closed.close()
    # torch logs its own lines about the connection too
    check(got == [False, None] and err.count("ddprun: metric points for the status page stop") == 1,
          "an unreachable store: False and one line: %s %r" % (got, err))
    notorch = os.path.join(TMP, "notorch")
    os.makedirs(os.path.join(notorch, "torch"), exist_ok=True)
    with open(os.path.join(notorch, "torch", "__init__.py"), "w") as f:
        f.write("raise ImportError('no torch here')\n")
    got, err = py(CALLS, PYTHONPATH=PKG_SRC + ":" + notorch,
                  **launcher_env(1, DDP_AGENT_VERSION="x"))
    check(got == [False, None] and err == "", "without torch: %s %r" % (got, err))
    rc, out, err = run([PY, "-c", "import ddprun; ddprun.publish_point('five')"],
                       base_env(PYTHONPATH=PKG_SRC))
    check(rc != 0 and "TypeError: ddprun.publish_point: step must be a number" in err,
          "a step that is not a number raises TypeError under any launcher: %d %s" % (rc, err))


def calls():
    check_import()
    check_points()
    check_beats()
    check_faults()


# -- pip --

def pip():
    src = os.path.join(TMP, "src")
    venv = os.path.join(TMP, "venv")
    for d in (src, venv):
        shutil.rmtree(d, ignore_errors=True)
    # A copy: a build from the source folder would leave build/ and ddprun.egg-info/ there.
    shutil.copytree(PKG_SRC, src, ignore=shutil.ignore_patterns(
        "__pycache__", "*.pyc", "build", "*.egg-info"))
    rc, out, err = run([PY, "-m", "venv", "--system-site-packages", venv], base_env())
    check(rc == 0, "python3 -m venv: %s%s" % (out, err))
    vpy = os.path.join(venv, "bin", "python")
    rc, out, err = run([vpy, "-m", "pip", "install", "--no-build-isolation", "--no-deps",
                        "--no-index", "--disable-pip-version-check", src],
                       base_env(PIP_NO_INPUT="1"), timeout=300)
    check(rc == 0, "pip install: %s%s" % (out, err))
    rc, out, err = run([vpy, "-c", "import json, ddprun; print(json.dumps([ddprun.__file__, "
                        "ddprun.__version__, ddprun.publish_point(1), "
                        "ddprun.report_progress(1)]))"],
                       base_env())
    check(rc == 0, "import ddprun in the venv: %s%s" % (out, err))
    path, version, point, beat = json.loads(out.strip().splitlines()[-1])
    site = os.path.join(venv, "lib")
    check(os.path.realpath(path).startswith(os.path.realpath(site) + os.sep) and
          "site-packages" in path, "ddprun imported from the venv's site-packages: %s" % path)
    check(version == cmake_version() and point is False and beat is None,
          "version %s, calls do nothing outside ddprun: %s %s" % (version, point, beat))
    installed, source = modules(os.path.dirname(path)), modules(os.path.join(PKG_SRC, "ddprun"))
    check(installed == source, "every module installed: %s vs %s" % (installed, source))


def modules(folder):
    return sorted(os.path.relpath(os.path.join(d, f), folder)
                  for d, _, files in os.walk(folder) for f in files if f.endswith(".py"))


# -- agent, installed --

WORKER = r"""
import json, os, sys
try:
    import ddprun
    file = ddprun.__file__
except ImportError:
    file = None
import usermod
with open(os.path.join(os.environ["REC_DIR"], "rec.%s.json" % os.environ["RANK"]), "w") as f:
    json.dump({"file": file, "pythonpath": os.environ.get("PYTHONPATH"),
               "agent": os.environ.get("DDP_AGENT_VERSION"), "usermod": usermod.__file__}, f)
"""


def ddprun_job(ddprun, name, python_path):
    """Runs a 2-worker standalone job of `ddprun` whose workers record where ddprun came from;
    checks --dry-run's python_path and returns the records."""
    work = os.path.join(TMP, name)
    shutil.rmtree(work, ignore_errors=True)
    user = os.path.join(work, "user")
    os.makedirs(user)
    with open(os.path.join(user, "usermod.py"), "w") as f:
        f.write("")
    script = os.path.join(work, "worker.py")
    with open(script, "w") as f:
        f.write(WORKER)
    env = base_env(PYTHON_EXEC=PY, DDP_NO_SLURM="1", PYTHONPATH=user, REC_DIR=work)
    rc, out, err = run([ddprun, "--dry-run", script], env)
    check(rc == 0 and json.loads(out).get("python_path") == python_path,
          "%s --dry-run's python_path is %r: %s%s" % (ddprun, python_path, out[-2000:], err))
    rc, out, err = run([ddprun, "--standalone", "--nproc-per-node", "2", script], env)
    check(rc == 0, "%s's job exited %d:\n%s%s" % (ddprun, rc, out, err[-3000:]))
    recs = [json.load(open(os.path.join(work, "rec.%d.json" % r))) for r in (0, 1)]
    for rec in recs:
        check(rec["pythonpath"] == (python_path + ":" + user if python_path else user) and
              rec["usermod"] == os.path.join(user, "usermod.py") and
              rec["agent"] == cmake_version(),
              "a worker's PYTHONPATH: the package's folder, then the user's: %s" % rec)
    return recs


def agent():
    python_path = os.path.join(BUILD, "python")
    for rec in ddprun_job(os.path.join(BIN, "ddprun"), "agent", python_path):
        check(rec["file"] == os.path.join(python_path, "ddprun", "__init__.py") and
              os.path.realpath(rec["file"]) == os.path.join(os.path.realpath(PKG_SRC), "ddprun",
                                                           "__init__.py"),
              "the worker imported build/python/ddprun, the source folder: %s" % rec)


def installed():
    prefix = os.path.join(TMP, "prefix")
    shutil.rmtree(prefix, ignore_errors=True)
    rc, out, err = run(["cmake", "--install", BUILD, "--component", "python", "--prefix", prefix],
                       base_env())
    check(rc == 0, "cmake --install: %s%s" % (out, err))
    package = os.path.join(prefix, "lib", "ddprun", "python", "ddprun")
    check(modules(package) == modules(os.path.join(PKG_SRC, "ddprun")), "every module installed")
    check(not any("__pycache__" in d or any(f.endswith(".pyc") for f in files)
                  for d, _, files in os.walk(package)), "no bytecode installed")
    os.makedirs(os.path.join(prefix, "bin"))
    ddprun = os.path.join(prefix, "bin", "ddprun")
    shutil.copy2(os.path.join(BIN, "ddprun"), ddprun)
    for rec in ddprun_job(ddprun, "installed", os.path.dirname(package)):
        check(rec["file"] == os.path.join(package, "__init__.py"),
              "the worker imported the installed package: %s" % rec)
    bare = os.path.join(TMP, "nopkg", "bin")
    shutil.rmtree(os.path.dirname(bare), ignore_errors=True)
    os.makedirs(bare)
    shutil.copy2(os.path.join(BIN, "ddprun"), bare)
    for rec in ddprun_job(os.path.join(bare, "ddprun"), "bare", ""):
        check(rec["file"] is None, "no package beside ddprun, none imported: %s" % rec)


def main():
    scenario = sys.argv[1]
    try:
        {"calls": calls, "pip": pip, "agent": agent, "installed": installed}[scenario]()
    except TestFailure as e:
        print("FAIL: %s" % e)
        return 1
    print("PASS")
    return 0


if __name__ == "__main__":
    sys.exit(main())
