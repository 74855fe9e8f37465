"""A worker for the multi-node tests (tests/integration/multinode_harness.py), run by ddprun.

It records what ddprun gave it in $MN_DIR/rec.<node>.<restart>.<rank>.json (torchrun's env contract,
its pid and its agent's pid), then acts on env knobs the harness sets per agent:
  MN_NODE           the agent's name in the test (part of the record name; default
                    n<SLURM_NODEID> under srun)
  MN_FAIL_RANK      global rank that exits with MN_FAIL_CODE ...
  MN_FAIL_UNTIL     ... while TORCHELASTIC_RESTART_COUNT < this (default: always)
  MN_FAIL_FROM      ... and only from this TORCHELASTIC_RESTART_COUNT on (default 0)
  MN_FAIL_CODE      exit code of the failing rank (default 7)
  MN_FAIL_WHILE     every worker of this agent exits with MN_FAIL_CODE while this file exists
                    (a bad node, whatever its ranks)
  MN_GO_FILE        the others wait (up to 60 s; exit 3 on timeout) until this file holds their
                    WORLD_SIZE, so the harness releases one generation and not an earlier one
  MN_TORCH          run a gloo all_reduce of (rank + 1) and record the sum
  MN_TORCH_LOOP     join a gloo group, record, then all_reduce in a loop (a peer's death fails it
                    with a gloo connection error) until every rank agrees MN_GO_FILE holds their
                    WORLD_SIZE
  MN_REACH          record whether a TCP connection to MASTER_ADDR:MASTER_PORT succeeds
  MN_PING           record whether the store at MASTER_ADDR:MASTER_PORT serves this worker: a v2
                    TCPStore VALIDATE + PING, answered unless the store refused the connection
Only the standard library (and torch when MN_TORCH is set).
"""
import json
import os
import sys
import time


def released(go, world):
    try:
        with open(go) as f:
            return f.read().strip() == world
    except OSError:
        return False


def torch_loop(go, world):
    """All ranks all_reduce until one of them sees the release; they leave the loop together."""
    import torch
    import torch.distributed as dist
    while True:
        flag = torch.tensor([1.0 if released(go, world) else 0.0])
        dist.all_reduce(flag, op=dist.ReduceOp.MAX)
        if flag.item() > 0:
            break
        time.sleep(0.05)
    dist.destroy_process_group()
    return 0


def store_ping(host, port):
    """True when the TCPStore at host:port answers a PING (VALIDATE first, as torch 2.x does)."""
    import socket
    import struct
    try:
        with socket.create_connection((host, port), 5) as sock:
            sock.settimeout(5)
            sock.sendall(b"\x00" + struct.pack("<I", 0x3C85F7CE) + b"\x0d" + struct.pack("<I", 77))
            reply = b""
            while len(reply) < 4:
                chunk = sock.recv(4 - len(reply))
                if not chunk:
                    return False
                reply += chunk
            return struct.unpack("<I", reply)[0] == 77
    except OSError:
        return False


def main():
    env = os.environ
    rank = int(env["RANK"])
    restart = int(env.get("TORCHELASTIC_RESTART_COUNT", "0"))
    record = {k: v for k, v in env.items()
              if k in ("RANK", "LOCAL_RANK", "WORLD_SIZE", "LOCAL_WORLD_SIZE", "GROUP_RANK",
                       "GROUP_WORLD_SIZE", "ROLE_RANK", "ROLE_WORLD_SIZE", "MASTER_ADDR",
                       "MASTER_PORT", "TORCHELASTIC_RESTART_COUNT", "TORCHELASTIC_MAX_RESTARTS",
                       "TORCHELASTIC_RUN_ID", "TORCHELASTIC_USE_AGENT_STORE")}
    record["pid"] = os.getpid()
    record["ppid"] = os.getppid()
    if env.get("MN_REACH"):
        import socket
        try:
            socket.create_connection((env["MASTER_ADDR"], int(env["MASTER_PORT"])), 5).close()
            record["reach"] = True
        except OSError:
            record["reach"] = False
    if env.get("MN_PING"):
        record["ping"] = store_ping(env["MASTER_ADDR"], int(env["MASTER_PORT"]))
    if env.get("MN_TORCH"):
        import torch
        import torch.distributed as dist
        dist.init_process_group("gloo")
        t = torch.tensor([float(rank + 1)])
        dist.all_reduce(t)
        record["allreduce"] = t.item()
        dist.barrier()
        dist.destroy_process_group()
    if env.get("MN_TORCH_LOOP"):  # recorded once every rank is in the group
        import datetime
        import torch.distributed as dist
        dist.init_process_group("gloo", timeout=datetime.timedelta(seconds=60))
    node = env.get("MN_NODE") or "n%s" % env.get("SLURM_NODEID", "")  # under srun: per node
    name = "%s/rec.%s.%d.%d.json" % (env["MN_DIR"], node, restart, rank)
    with open(name + ".tmp", "w") as f:
        json.dump(record, f)
    os.rename(name + ".tmp", name)
    fail_rank = int(env.get("MN_FAIL_RANK", "-1"))
    fail_until = int(env.get("MN_FAIL_UNTIL", "1000000"))
    fail_from = int(env.get("MN_FAIL_FROM", "0"))
    if rank == fail_rank and fail_from <= restart < fail_until:
        print("multinode_worker: rank %d fails at restart %d" % (rank, restart), file=sys.stderr)
        sys.exit(int(env.get("MN_FAIL_CODE", "7")))
    bad = env.get("MN_FAIL_WHILE")
    if bad and os.path.exists(bad):
        print("multinode_worker: rank %d fails on a bad node at restart %d" % (rank, restart),
              file=sys.stderr)
        sys.exit(int(env.get("MN_FAIL_CODE", "7")))
    go = env.get("MN_GO_FILE")
    if env.get("MN_TORCH_LOOP"):
        return torch_loop(go, env["WORLD_SIZE"])
    if go:
        deadline = time.monotonic() + 60
        while not released(go, env["WORLD_SIZE"]):
            if time.monotonic() > deadline:
                sys.exit(3)
            time.sleep(0.05)
    return 0


if __name__ == "__main__":
    sys.exit(main())
