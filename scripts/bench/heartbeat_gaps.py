#!/usr/bin/python3
"""Heartbeat gaps of real ddprun agents whose workers keep every core busy.

  scripts/bench/heartbeat_gaps.py BUILD_DIR [--seconds 60] [--interval 1] [--agents 2]
                                            [--nproc 2] [--stress N]

Starts a ddprund (port 0), AGENTS ddprun agents (--nnodes=AGENTS, NPROC CPU-spinning workers
each, keep_alive_interval=INTERVAL, heartbeat_timeout = 3 x INTERVAL) and, with --stress, a
`stress-ng --cpu N` beside them. An observer polls every agent's heartbeat counter
(rdzv/<id>/r/0/hb/<rank>) on ddprund every 10 ms over a raw v2 connection and prints, per node
rank, how far apart the counter's changes were (p50 / p99 / max, ms; ideal = the interval) and
whether any round ended. Every process started here is stopped by pid.
"""
import argparse
import os
import signal
import socket
import statistics
import struct
import subprocess
import sys
import tempfile
import time

SRC = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
WORKER = os.path.join(SRC, "tests", "integration", "spin_worker.py")


class V2Client:
    """GET over the TCPStore v2 wire protocol (VALIDATE, then GET = 03 + u64 len + key)."""

    def __init__(self, port):
        self.sock = socket.create_connection(("127.0.0.1", port))
        self.sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        self.sock.sendall(bytes.fromhex("00cef7853c"))

    def recv(self, n):
        data = b""
        while len(data) < n:
            chunk = self.sock.recv(n - len(data))
            if not chunk:
                raise OSError("ddprund closed the connection")
            data += chunk
        return data

    def get(self, key):
        k = key.encode()
        self.sock.sendall(b"\x03" + struct.pack("<Q", len(k)) + k)
        (length,) = struct.unpack("<Q", self.recv(8))
        return self.recv(length).decode() if length else ""


def percentile(values, p):
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(round(p / 100.0 * (len(ordered) - 1))))]


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("build")
    ap.add_argument("--seconds", type=float, default=60)
    ap.add_argument("--interval", type=float, default=1.0)
    ap.add_argument("--agents", type=int, default=2)
    ap.add_argument("--nproc", type=int, default=2)
    ap.add_argument("--stress", type=int, default=0)
    args = ap.parse_args()
    bindir = os.path.join(args.build, "bin")
    tmp = tempfile.mkdtemp(prefix="hbgaps.")
    procs = []

    def spawn(name, argv, env=None):
        out = open(os.path.join(tmp, name + ".log"), "w")
        p = subprocess.Popen(argv, stdout=out, stderr=subprocess.STDOUT, env=env,
                             start_new_session=True)
        procs.append(p)
        return p

    try:
        port_file = os.path.join(tmp, "port")
        spawn("ddprund", [os.path.join(bindir, "ddprund"), "--host", "127.0.0.1", "--port", "0",
                          "--port-file", port_file])
        deadline = time.monotonic() + 30
        while not (os.path.exists(port_file) and open(port_file).read().strip()):
            if time.monotonic() > deadline:
                sys.exit("ddprund did not start")
            time.sleep(0.05)
        port = int(open(port_file).read())
        conf = "keep_alive_interval=%g,heartbeat_timeout=%g" % (args.interval, 3 * args.interval)
        env = dict(os.environ, MN_DIR=tmp, SPIN_SECONDS=str(args.seconds), DDP_NO_SLURM="1")
        if args.stress:
            spawn("stress", ["stress-ng", "--cpu", str(args.stress), "--timeout",
                             str(int(args.seconds) + 30)])
        agents = []
        for i in range(args.agents):
            env_i = dict(env, MN_NODE="n%d" % i)
            agents.append(spawn("agent%d" % i, [
                os.path.join(bindir, "ddprun"), "--nnodes", str(args.agents), "--nproc-per-node",
                str(args.nproc), "--rdzv-backend", "c10d", "--rdzv-endpoint",
                "127.0.0.1:%d" % port, "--rdzv-id", "gaps", "--rdzv-conf", conf,
                "/usr/bin/python3", WORKER], env_i))
        client = V2Client(port)
        keys = ["rdzv/gaps/r/0/hb/%d" % r for r in range(args.agents)]
        last = {k: None for k in keys}
        changes = {k: [] for k in keys}
        until = time.monotonic() + args.seconds
        while time.monotonic() < until and all(a.poll() is None for a in agents):
            for k in keys:
                v = client.get(k)
                if v and v != last[k]:
                    if last[k] is not None:
                        changes[k].append(time.monotonic())
                    last[k] = v
            time.sleep(0.01)
        print("interval %g s, heartbeat_timeout %g s, %d agents x %d spinning workers%s, %g s"
              % (args.interval, 3 * args.interval, args.agents, args.nproc,
                 ", stress-ng --cpu %d" % args.stress if args.stress else "", args.seconds))
        for k in keys:
            gaps = [1000 * (b - a) for a, b in zip(changes[k], changes[k][1:])]
            if not gaps:
                print("%s: no heartbeats seen" % k)
                continue
            print("%s: %d gaps, p50 %.0f ms, p99 %.0f ms, max %.0f ms (mean %.0f)" %
                  (k, len(gaps), percentile(gaps, 50), percentile(gaps, 99), max(gaps),
                   statistics.mean(gaps)))
        ended = []
        for i in range(args.agents):
            with open(os.path.join(tmp, "agent%d.log" % i), errors="replace") as f:
                ended += [l.strip() for l in f if "rendezvous round" in l and "ended" in l]
        print("round ends: %d%s" % (len(ended), "".join("\n  " + l for l in ended)))
    finally:
        for p in procs:
            if p.poll() is None:
                os.killpg(p.pid, signal.SIGTERM)
        for p in procs:
            try:
                p.wait(timeout=10)
            except subprocess.TimeoutExpired:
                os.killpg(p.pid, signal.SIGKILL)
                p.wait()


if __name__ == "__main__":
    main()
