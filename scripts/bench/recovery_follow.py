"""Following a job from outside for scripts/bench/recovery_bench.py: its rank 0's progress file
(JSON lines, woken by inotify) and its processes (/proc).

Used by one thread; every function reads /proc at the time of the call.
"""
import ctypes
import json
import os
import select
import sys
import time


class BenchError(Exception):
    pass


def log(msg):
    print("[bench %s] %s" % (time.strftime("%H:%M:%S"), msg), file=sys.stderr, flush=True)


# -- following the progress file ----------------------------------------------------------------
class Follower:
    """Reads the JSON lines appended to `path`, waking on inotify (polling every 2 ms without)."""
    IN_MODIFY, IN_CREATE = 0x2, 0x100

    def __init__(self, path):
        self.path, self.offset, self.partial = path, 0, b""
        self.lines = []  # (seen monotonic, record)
        self.fd = -1
        libc = ctypes.CDLL("libc.so.6", use_errno=True)
        fd = libc.inotify_init1(os.O_NONBLOCK | os.O_CLOEXEC)
        if fd >= 0 and libc.inotify_add_watch(fd, os.path.dirname(path).encode(),
                                              self.IN_MODIFY | self.IN_CREATE) >= 0:
            self.fd = fd
        elif fd >= 0:
            os.close(fd)

    def close(self):
        if self.fd >= 0:
            os.close(self.fd)
            self.fd = -1

    def read(self):
        """Appends every complete line now in the file; returns the new (seen, record) pairs."""
        try:
            with open(self.path, "rb") as f:
                f.seek(self.offset)
                data = f.read()
        except FileNotFoundError:
            return []
        now = time.monotonic()
        self.offset += len(data)
        chunks = (self.partial + data).split(b"\n")
        self.partial = chunks.pop()
        new = []
        for c in chunks:
            if c.strip().startswith(b"{"):
                rec = json.loads(c)
                if "step" in rec:
                    new.append((now, rec))
        self.lines += new
        return new

    def wait(self, timeout):
        """Blocks until the file may have changed or `timeout` s passed."""
        if self.fd >= 0:
            r, _, _ = select.select([self.fd], [], [], max(0.0, timeout))
            if r:
                try:
                    os.read(self.fd, 65536)
                except BlockingIOError:
                    pass
        else:
            time.sleep(min(0.002, max(0.0, timeout)))

    def until(self, what, pred, timeout, alive=None):
        """Reads lines until pred(new_pairs) is truthy; returns its value."""
        deadline = time.monotonic() + timeout
        while True:
            value = pred(self.read())
            if value:
                return value
            if alive is not None and not alive():
                raise BenchError("the job ended while waiting for " + what)
            left = deadline - time.monotonic()
            if left <= 0:
                raise BenchError("timed out after %.0f s waiting for %s" % (timeout, what))
            self.wait(min(left, 0.05))

    def last(self):
        return self.lines[-1][1] if self.lines else None


# -- processes ---------------------------------------------------------------------------------
def proc_stat(pid):
    try:
        with open("/proc/%d/stat" % pid) as f:
            fields = f.read().rsplit(")", 1)[1].split()
        return fields[0], int(fields[1]), fields[19]  # state, ppid, starttime
    except (OSError, IndexError, ValueError):
        return None


def descendants(pid):
    kids = {}
    for entry in os.listdir("/proc"):
        if entry.isdigit():
            st = proc_stat(int(entry))
            if st and st[0] != "Z":
                kids.setdefault(st[1], []).append(int(entry))
    out, todo = [], [pid]
    while todo:
        for k in kids.get(todo.pop(), []):
            out.append(k)
            todo.append(k)
    return out


def environ(pid):
    try:
        with open("/proc/%d/environ" % pid, "rb") as f:
            return dict(kv.split(b"=", 1) for kv in f.read().split(b"\0") if b"=" in kv)
    except OSError:
        return {}


def cmdline(pid):
    try:
        with open("/proc/%d/cmdline" % pid, "rb") as f:
            return f.read()
    except OSError:
        return b""
