"""(b) two torch 1.13 ranks: init_process_group("gloo", "env://") with every rank a client of
ddprund (TORCHELASTIC_USE_AGENT_STORE=True), then an all_reduce checked on both ranks."""
import os
import struct
import subprocess
import sys
from datetime import timedelta

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
from peer_common import (PYTHON, Children, Ddprund, RawConn, fail, req_add,  # noqa: E402
                         req_numkeys, require_torch)


def worker(rank, world):
    import torch
    import torch.distributed as dist

    dist.init_process_group("gloo", init_method="env://", rank=rank, world_size=world,
                            timeout=timedelta(seconds=90))
    t = torch.tensor([float(rank + 1)])
    dist.all_reduce(t)
    expected = world * (world + 1) / 2
    if t.item() != expected:
        fail("rank %d: all_reduce gave %s, wanted %s" % (rank, t.item(), expected))
    dist.barrier()
    print("rank %d all_reduce OK" % rank, flush=True)
    dist.destroy_process_group()


def main():
    require_torch()
    world = 2
    with Ddprund() as daemon, Children() as children:
        env = dict(os.environ, MASTER_ADDR="127.0.0.1", MASTER_PORT=str(daemon.port),
                   WORLD_SIZE=str(world), TORCHELASTIC_USE_AGENT_STORE="True",
                   TORCHELASTIC_RESTART_COUNT="0", GLOO_SOCKET_IFNAME="lo", OMP_NUM_THREADS="1")
        procs = [children.start([PYTHON, __file__, "--worker", str(rank), str(world)],
                                env=dict(env, RANK=str(rank)), stdout=subprocess.PIPE,
                                stderr=subprocess.STDOUT, text=True)
                 for rank in range(world)]
        for rank, proc in enumerate(procs):
            try:
                out, _ = proc.communicate(timeout=100)
            except subprocess.TimeoutExpired:
                fail("rank %d did not finish within 100 s" % rank)
            print(out, end="")
            if proc.returncode != 0 or ("rank %d all_reduce OK" % rank) not in out:
                fail("rank %d failed with exit code %s" % (rank, proc.returncode))

        # The ranks really used ddprund: both init/ handshakes and their gloo keys are there.
        raw = RawConn(daemon.port)
        raw.send(req_add(b"init/", 0))  # unprefixed, as TCPStore's handshake sends it
        reply = raw.read(8)
        if not isinstance(reply, bytes) or struct.unpack("<q", reply)[0] != world:
            fail("ddprund did not see both ranks' init/ handshakes: %r" % (reply,))
        raw.send(req_numkeys())
        reply = raw.read(8)
        if not isinstance(reply, bytes) or struct.unpack("<q", reply)[0] < 4:
            fail("ddprund holds too few keys after gloo init: %r" % (reply,))
        raw.close()
    print("gloo env:// over ddprund: OK")


if __name__ == "__main__":
    if len(sys.argv) == 4 and sys.argv[1] == "--worker":
        worker(int(sys.argv[2]), int(sys.argv[3]))
    else:
        main()
