"""(c) two unmodified torchrun 1.13 agents (c10d rendezvous backend, endpoint = ddprund) run a
4-rank gloo job: every rank 0..3 reports world 4 and the right all_reduce sum."""
import os
import re
import subprocess
import sys
import uuid

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
from peer_common import PYTHON, Children, Ddprund, fail, require_torch  # noqa: E402


def main():
    require_torch()
    run_id = "ddprund-test-" + uuid.uuid4().hex[:12]  # unique: ddprund outlives jobs (§4.6)
    with Ddprund() as daemon, Children() as children:
        env = dict(os.environ, GLOO_SOCKET_IFNAME="lo", OMP_NUM_THREADS="1")
        agent_args = [PYTHON, "-m", "torch.distributed.run", "--nnodes=2", "--nproc_per_node=2",
                      "--rdzv_backend=c10d", "--rdzv_endpoint=127.0.0.1:%d" % daemon.port,
                      "--rdzv_id=" + run_id, "--rdzv_conf", "is_host=false", "--redirects=1",
                      "--tee=1", "--max_restarts=0", "--monitor_interval=1",
                      os.path.join(HERE, "torchrun_worker.py")]
        agents = [children.start(agent_args, env=env, stdout=subprocess.PIPE,
                                 stderr=subprocess.STDOUT, text=True) for _ in range(2)]
        output = ""
        for i, agent in enumerate(agents):
            try:
                out, _ = agent.communicate(timeout=110)
            except subprocess.TimeoutExpired:
                fail("torchrun agent %d did not finish within 110 s" % i)
            output += out
            if agent.returncode != 0:
                print(out)
                fail("torchrun agent %d exited with %s" % (i, agent.returncode))
        seen = {}
        for m in re.finditer(r"WORKER RANK (\d+) WORLD (\d+) SUM (\d+) RESTART (\S+)", output):
            seen[int(m.group(1))] = (int(m.group(2)), int(m.group(3)), m.group(4))
        if sorted(seen) != [0, 1, 2, 3]:
            print(output)
            fail("ranks seen: %s, wanted 0..3" % sorted(seen))
        for rank, (world, total, restart) in seen.items():
            if world != 4 or total != 10 or restart != "0":
                fail("rank %d reported world %d sum %d restart %s" % (rank, world, total, restart))
        if "closing connection" in daemon.read_log():  # a malformed-input close: incompatible
            fail("ddprund closed a torchrun connection: " + daemon.read_log())
    print("two torchrun 1.13 agents over ddprund (c10d): OK, ranks 0..3, world 4")


if __name__ == "__main__":
    main()
