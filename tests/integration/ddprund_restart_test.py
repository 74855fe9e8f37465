"""A training job rides out a kill -9 and restart of ddprund (issue 11, items 1 and 2).

  ddprund_restart_test.py [--fsync always|batch|off]

Three real `ddprun` agents (one `train` worker each, Gloo) rendezvous on a ddprund started with
--data-dir. Once training runs, the agents are paused (SIGSTOP, so no key changes between the
dumps), every key is dumped (LIST_KEYS + GET), ddprund is killed with SIGKILL and started again
0.5 s later on the same port from the same --data-dir, the keys are dumped again and must match
byte for byte; then the agents continue. The job must finish (every agent exits 0) in generation
0 only (no worker restart), every agent having reconnected to the store. Exits 0 (pass) or 1.
Processes are started and stopped by pid through multinode_harness.Harness.
"""
import json
import os
import shutil
import signal
import socket
import struct
import sys
import time

sys.dont_write_bytecode = True  # nothing written into the source tree
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from multinode_harness import (BIN, SRC, TMP, TestFailure, c10d, check,  # noqa: E402
                               json_lines, poll, run_scenario)

CONF = ("join_timeout=60,last_call_timeout=0.5,close_timeout=10,keep_alive_interval=0.5,"
        "heartbeat_timeout=10,read_timeout=30")


def dump_keys(port):
    """{key: value} of every key in the store at 127.0.0.1:port (v2: LIST_KEYS, then GETs)."""
    with socket.create_connection(("127.0.0.1", port), timeout=10) as s:
        def recv(n):
            data = b""
            while len(data) < n:
                chunk = s.recv(n - len(data))
                if not chunk:
                    raise TestFailure("the store closed the dump connection")
                data += chunk
            return data

        def string(b):
            return struct.pack("<Q", len(b)) + b

        s.sendall(b"\x00" + struct.pack("<I", 0x3C85F7CE) + bytes([17]))  # VALIDATE, LIST_KEYS
        keys = [recv(struct.unpack("<Q", recv(8))[0])
                for _ in range(struct.unpack("<q", recv(8))[0])]
        dump = {}
        for key in keys:
            s.sendall(bytes([3]) + string(key))  # GET
            dump[key] = recv(struct.unpack("<Q", recv(8))[0])
        return dump


def start_ddprund(h, data_dir, fsync, port=0, name="ddprund"):
    port_file = os.path.join(TMP, name + ".port")
    h.spawn(name, [os.path.join(BIN, "ddprund"), "--host", "127.0.0.1", "--port", str(port),
                   "--port-file", port_file, "--data-dir", data_dir, "--fsync", fsync])
    return int(poll(name + "'s port file",
                    lambda: os.path.exists(port_file) and open(port_file).read().strip(), 30))


def scenario(h, fsync):
    for name in os.listdir(TMP):  # the harness clears files; a run before may have left folders
        if os.path.isdir(os.path.join(TMP, name)):
            shutil.rmtree(os.path.join(TMP, name))
    data = os.path.join(TMP, "data")
    h.spawn("make-data", [os.path.join(BIN, "train"), "make-data", "--out", data, "--samples",
                          "6000", "--features", "32", "--classes", "4", "--shards", "3",
                          "--seed", "1"])
    maker = next(p for n, p in h.procs if n == "make-data")
    check(h.wait_exit(maker, "make-data", 60) == 0, "train make-data failed")
    data_dir = os.path.join(TMP, "ddprund-data")
    port = start_ddprund(h, data_dir, fsync)
    metrics = os.path.join(TMP, "metrics.jsonl")
    config = os.path.join(TMP, "config.json")
    with open(os.path.join(SRC, "configs", "quickstart.json")) as f:
        settings = json.load(f)
    settings["epochs"] = 10  # long enough that the daemon goes and comes back mid-run
    with open(config, "w") as f:
        json.dump(settings, f)
    train = [os.path.join(BIN, "train"), "--config", config,
             "--data", data, "--checkpoint-dir", os.path.join(TMP, "ckpt"), "--metrics", metrics]
    flags = c10d(port, 3, 1, run_id="restart", conf=CONF, extra=["--max-restarts", "0"])
    env = dict(os.environ, DDP_NO_SLURM="1")
    agents = {n: h.spawn(n, [os.path.join(BIN, "ddprun")] + flags + train, env)
              for n in ("a", "b", "c")}
    poll("the first metrics of rank 0", lambda: json_lines(metrics), 90)
    for n, p in agents.items():
        check(p.poll() is None, "agent %s ended before the daemon was killed" % n)
        os.kill(p.pid, signal.SIGSTOP)
    try:
        # A request an agent sent just before its SIGSTOP may still be in the daemon's socket
        # buffers: the stored keys are the daemon's once two dumps in a row agree.
        before, again = None, dump_keys(port)
        for _ in range(100):
            if again == before:
                break
            before, again = again, dump_keys(port)
        check(again == before, "the key dump keeps changing with every agent stopped")
        daemon = next(p for n, p in h.procs if n == "ddprund")
        os.kill(daemon.pid, signal.SIGKILL)
        daemon.wait()
        steps_at_kill = json_lines(metrics)[-1]["step"]
        h.log("SIGKILL ddprund with %d keys at step %d; restarting in 0.5 s" %
              (len(before), steps_at_kill))
        time.sleep(0.5)  # the scenario: the daemon is away for half a second
        start_ddprund(h, data_dir, fsync, port, "ddprund2")
        after = dump_keys(port)
    finally:
        for p in agents.values():
            os.kill(p.pid, signal.SIGCONT)
    check(len(before) > 5, "only %d keys before the kill" % len(before))
    missing = sorted(k for k in before if k not in after)
    changed = sorted(k for k in before if k in after and before[k] != after[k])
    extra = sorted(k for k in after if k not in before)
    check(not missing and not changed and not extra,
          "the key dump differs after the restart: missing %s, changed %s, new %s" %
          (missing[:5], changed[:5], extra[:5]))
    h.log("the key dump matches after the restart (%d keys)" % len(after))
    for n, p in agents.items():
        rc = h.wait_exit(p, n, 240)
        check(rc == 0, "agent %s exited %d:\n%s" % (n, rc, h.output(n)[-3000:]))
    lines = json_lines(metrics)
    check(lines[-1]["step"] > steps_at_kill, "training did not go on after the restart")
    gens = sorted({line["generation"] for line in lines})
    check(gens == [0], "metrics of generations %s: a worker restart happened" % gens)
    for n in agents:
        out = h.output(n)
        check("reconnected to the store" in out, "agent %s never reconnected:\n%s" %
              (n, out[-2000:]))
        check("round 0 ended" not in out, "agent %s saw its round end:\n%s" % (n, out[-2000:]))
    h.log("PASS: job finished in generation 0 after the daemon restart (final step %d)" %
          lines[-1]["step"])


def main(argv):
    fsync = argv[2] if len(argv) == 3 and argv[1] == "--fsync" else "batch"
    return run_scenario([argv[0], "restart"], {"restart": lambda h: scenario(h, fsync)},
                        budget_s=420, tails=2500)


if __name__ == "__main__":
    sys.exit(main(sys.argv))
