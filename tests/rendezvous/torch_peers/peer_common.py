"""Shared helpers of the real-PyTorch-1.13 peer tests: a ddprund child process and raw v1a bytes.

Run with /usr/bin/python3 (Debian's python3-torch 1.13). Environment from ddp_add_script_test:
DDP_BIN_DIR (ddprund lives there) and DDP_TEST_TMP (scratch space).
"""
import os
import signal
import socket
import struct
import subprocess
import sys
import time

BIN_DIR = os.environ.get("DDP_BIN_DIR", os.path.join(os.getcwd(), "build", "bin"))
TMP = os.environ.get("DDP_TEST_TMP", "/tmp")
PYTHON = "/usr/bin/python3"


def require_torch():
    """Exit 77 (registered as SKIP_RETURN_CODE) when this interpreter has no torch 1.x."""
    import importlib.util  # find_spec: no costly import of torch itself here
    if importlib.util.find_spec("torch") is None:
        print("SKIP: %s has no torch module" % sys.executable, flush=True)
        sys.exit(77)


def fail(message):
    print("FAIL: " + message, file=sys.stderr, flush=True)
    sys.exit(1)


class Ddprund:
    """ddprund on port 0 for the duration of a `with` block; stopped by pid with SIGTERM.

    Leaving the block asserts a clean exit (code 0); the process is always reaped.
    """

    _count = 0

    def __init__(self, *extra_args, host="127.0.0.1"):
        Ddprund._count += 1
        tag = "%d-%d" % (os.getpid(), Ddprund._count)
        self.port_file = os.path.join(TMP, "ddprund-%s.port" % tag)
        self.log_path = os.path.join(TMP, "ddprund-%s.log" % tag)
        self.args = [os.path.join(BIN_DIR, "ddprund"), "--host", host, "--port", "0",
                     "--port-file", self.port_file] + list(extra_args)
        self.proc = None
        self.port = None

    def __enter__(self):
        if os.path.exists(self.port_file):
            os.remove(self.port_file)
        self.log = open(self.log_path, "w")
        self.proc = subprocess.Popen(self.args, stdout=self.log, stderr=subprocess.STDOUT)
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline:
            if self.proc.poll() is not None:
                fail("ddprund exited early (%s): %s" % (self.proc.returncode, self.read_log()))
            try:
                with open(self.port_file) as f:
                    text = f.read()
                if text.endswith("\n"):
                    self.port = int(text)
                    return self
            except FileNotFoundError:
                pass
            time.sleep(0.01)
        self.kill()
        fail("ddprund wrote no port file within 30 s: " + self.read_log())

    def read_log(self):
        with open(self.log_path) as f:
            return f.read()

    def kill(self):
        if self.proc and self.proc.poll() is None:
            self.proc.kill()
            self.proc.wait()

    def __exit__(self, exc_type, exc, tb):
        try:
            if self.proc.poll() is None:
                self.proc.send_signal(signal.SIGTERM)
                try:
                    self.proc.wait(timeout=20)
                except subprocess.TimeoutExpired:
                    self.kill()
                    fail("ddprund did not stop within 20 s of SIGTERM")
            if exc_type is None and self.proc.returncode != 0:
                fail("ddprund exited with %s: %s" % (self.proc.returncode, self.read_log()))
        finally:
            self.kill()
            self.log.close()
        return False


class Children:
    """Child processes that are always killed (by pid) and reaped when the block ends."""

    def __init__(self):
        self.procs = []

    def __enter__(self):
        return self

    def start(self, args, **kwargs):
        proc = subprocess.Popen(args, **kwargs)
        self.procs.append(proc)
        return proc

    def __exit__(self, *exc):
        for proc in self.procs:
            if proc.poll() is None:
                proc.kill()
            proc.wait()
        return False


# ---- raw v1a (torch 1.13) request bytes ---------------------------------------------------------

def _str(b):
    return struct.pack("<Q", len(b)) + b


def _keys(keys):
    return struct.pack("<Q", len(keys)) + b"".join(_str(k) for k in keys)


def req_set(k, v):
    return b"\x00" + _str(k) + _str(v)


def req_cas(k, expected, desired):
    return b"\x01" + _str(k) + _str(expected) + _str(desired)


def req_get(k):
    return b"\x02" + _str(k)


def req_add(k, n):
    return b"\x03" + _str(k) + struct.pack("<q", n)


def req_check(keys):
    return b"\x04" + _keys(keys)


def req_wait(keys):
    return b"\x05" + _keys(keys)


def req_numkeys():
    return b"\x06"


def req_watch(k):
    return b"\x07" + _str(k)


def req_delete(k):
    return b"\x08" + _str(k)


class RawConn:
    """A blocking raw TCP connection; reads return bytes, or 'EOF' / 'TIMEOUT' as text."""

    def __init__(self, port, host="127.0.0.1"):
        self.sock = socket.create_connection((host, port), timeout=10)
        self.sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)

    def send(self, data):
        try:
            self.sock.sendall(data)
        except OSError:
            pass  # the read that follows reports the closed connection

    def read(self, n, timeout=10.0):
        self.sock.settimeout(timeout)
        out = b""
        try:
            while len(out) < n:
                chunk = self.sock.recv(n - len(out))
                if not chunk:
                    return "EOF"
                out += chunk
        except socket.timeout:
            return "TIMEOUT"
        except ConnectionResetError:
            return "EOF"
        return out

    def read_value(self):
        head = self.read(8)
        if not isinstance(head, bytes):
            return head
        (n,) = struct.unpack("<Q", head)
        body = self.read(n) if n else b""
        return body if isinstance(body, str) else head + body

    def close(self):
        self.sock.close()
