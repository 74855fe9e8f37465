#!/usr/bin/python3
"""How soon a worker's output reaches the terminal: ddprun vs torchrun 1.13, side by side.

  scripts/bench/console_latency.py [BUILD_DIR]      (default: build)

Each launcher runs in a pseudo-terminal of its own (as at a person's terminal) with one Python
worker that writes, 40 times each, 50 ms apart:
  * a line:          "L<i> <t>\\n"   (flushed)
  * a "\\r" update:   "\\rR<i> <t>"   (flushed, no newline: a progress bar)
where <t> is CLOCK_MONOTONIC in ns just before the write. This script reads the terminal and
notes when each text first shows; latency = that moment - <t> (one clock, one machine). An update
that never shows on its own is counted when its line finally ends (the worker's last "\\n").
Prints the median and p90 per launcher and kind, and the ratios. torchrun runs as Debian's
python3 -m torch.distributed.run --standalone --redirects=1 --tee=1 (what torch 1.13 needs on
Python 3.11), ddprun as ddprun --standalone.
"""
import os
import pty
import re
import select
import statistics
import sys
import tempfile
import time

BUILD = sys.argv[1] if len(sys.argv) > 1 else "build"
DDPRUN = os.path.abspath(os.path.join(BUILD, "bin", "ddprun"))
PY = "/usr/bin/python3"
COUNT = 40

WORKER = r'''
import sys, time
out = sys.stdout
for i in range(%d):
    out.write("L%%d %%d\n" %% (i, time.monotonic_ns())); out.flush(); time.sleep(0.05)
for i in range(%d):
    out.write("\rR%%d %%d" %% (i, time.monotonic_ns())); out.flush(); time.sleep(0.05)
out.write("\n"); out.flush()
''' % (COUNT, COUNT)


def run(argv, env):
    """Runs argv in a pty; returns {text: first arrival (monotonic ns)} for L/R marks."""
    pid, fd = pty.fork()
    if pid == 0:
        os.execve(argv[0], argv, env)
    seen, screen = {}, b""
    while True:
        ready, _, _ = select.select([fd], [], [], 120)
        if not ready:
            break
        try:
            data = os.read(fd, 65536)
        except OSError:
            data = b""
        now = time.monotonic_ns()
        if not data:
            break
        screen += data
        for m in re.finditer(rb"([LR]\d+) (\d+)", screen):
            seen.setdefault((m.group(1).decode(), int(m.group(2))), now)
        screen = screen[-4096:]
    os.waitpid(pid, 0)
    os.close(fd)
    return seen


def stats(seen, kind):
    lat = [(at - t) / 1e6 for (mark, t), at in seen.items() if mark[0] == kind]
    if len(lat) < COUNT // 2:
        return None
    lat.sort()
    return statistics.median(lat), lat[int(len(lat) * 0.9) - 1], len(lat)


def main():
    work = tempfile.mkdtemp(prefix="console_latency_")
    script = os.path.join(work, "worker.py")
    with open(script, "w") as f:
        f.write(WORKER)
    env = dict(os.environ, PYTHON_EXEC=PY, DDP_NO_SLURM="1", TERM="xterm")
    env.pop("PYTHONUNBUFFERED", None)
    runs = {
        "ddprun": run([DDPRUN, "--standalone", "--nproc-per-node=1", script], env),
        "torchrun 1.13": run([PY, "-m", "torch.distributed.run", "--standalone",
                              "--nproc_per_node=1", "--redirects=1", "--tee=1", script], env),
    }
    print("| text | launcher | median ms | p90 ms | shown |")
    print("|---|---|---|---|---|")
    table = {}
    for kind, what in (("L", "a line"), ("R", "a \\r update")):
        for name, seen in runs.items():
            s = stats(seen, kind)
            table[(kind, name)] = s
            if s is None:
                print("| %s | %s | - | - | fewer than %d of %d |" % (what, name, COUNT // 2, COUNT))
            else:
                print("| %s | %s | %.1f | %.1f | %d of %d |" % (what, name, s[0], s[1], s[2],
                                                               COUNT))
    for kind, what in (("L", "line"), ("R", "\\r update")):
        d, t = table[(kind, "ddprun")], table[(kind, "torchrun 1.13")]
        if d and t:
            print("%s: ddprun shows it %.0fx sooner (median)" % (what, t[0] / max(d[0], 0.01)))


if __name__ == "__main__":
    main()
