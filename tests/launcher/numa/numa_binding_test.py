"""--numa-binding applied for real (issue 13, item 3): ddprun binds each worker before it starts.

This machine's own topology may be a single NUMA node, so the agent reads small XML topologies
from tests/launcher/data whose CPUs are 0 and 1 (HWLOC_XMLFILE, HWLOC_THISSYSTEM=1: hwloc takes
them for this machine), and each worker records its /proc/self/status Cpus_allowed_list and
Mems_allowed_list and the memory policy in /proc/self/numa_maps. Checked for every policy:

  numa_2n_here.xml     2 sockets, one NUMA node and CPU each, GPUs crossed (GPU 0 on node 1):
                       every policy puts local rank 0 on CPU 1, rank 1 on CPU 0 with memory
                       preferred on node 0 (node 1 has no memory here: rank 0's stays unbound)
  numa_1n2l3_here.xml  one node, two cores in two L3 domains: exclusive and core-complex split
                       them (CPU 0, CPU 1); node and socket say "nothing to bind" and bind nothing
  numa_1n1core_here.xml  one core with 2 threads: exclusive for 2 workers is a one-line error
                       (exit 2, no worker starts); core-complex has nothing to bind
  CUDA_VISIBLE_DEVICES=1,0 puts rank 0 on CPU 0; --virtual-local-rank still binds by the real
                       local rank
  without the flag     the workers keep both CPUs (what the checks above would see without the
                       feature)

and --dry-run shows each policy's plan on the 2 sockets x 4 nodes x 8 GPUs topology
(numa_2s4n8g.xml), with CUDA_VISIBLE_DEVICES applied, marked as not applied here.
Every ddprun is run to its exit with a deadline (subprocess.run kills it past that).
"""
import json
import os
import subprocess
import sys

BIN = os.environ["DDP_BIN_DIR"]
SRC = os.environ["DDP_SOURCE_DIR"]
TMP = os.environ["DDP_TEST_TMP"]
DATA = os.path.join(SRC, "tests", "launcher", "data")
DDPRUN = os.path.join(BIN, "ddprun")
POLICIES = ["node", "socket", "exclusive", "core-complex"]

WORKER = r"""#!/bin/sh
out="$1/rank$RANK"  # one node: RANK is the local rank (LOCAL_RANK is 0 with --virtual-local-rank)
{
  grep -E '^(Cpus|Mems)_allowed_list' /proc/self/status
  echo "Policy: $(head -n 1 /proc/self/numa_maps | cut -d' ' -f2-3 | sed 's/ file=.*//')"
} > "$out.tmp" && mv "$out.tmp" "$out"
"""


class TestFailure(Exception):
    pass


def check(cond, what):
    if not cond:
        raise TestFailure(what)


def own_status(field):
    with open("/proc/self/status") as f:
        return [l.split()[1] for l in f if l.startswith(field + ":")][0]


def preferred(node):
    """The policy numa_maps shows for "preferred on <node>" (MPOL_PREFERRED before Linux 5.15)."""
    return ("prefer (many):%d" % node, "prefer:%d" % node)


def run(tag, flags, topology=None, env_extra=None, nproc=2, expect_rc=0):
    out = os.path.join(TMP, tag)
    os.makedirs(out, exist_ok=True)
    for name in os.listdir(out):
        os.unlink(os.path.join(out, name))
    env = dict(os.environ, DDP_NO_SLURM="1")
    for name in ("HWLOC_XMLFILE", "HWLOC_SYNTHETIC", "HWLOC_THISSYSTEM", "CUDA_VISIBLE_DEVICES"):
        env.pop(name, None)
    if topology:
        env.update(HWLOC_XMLFILE=os.path.join(DATA, topology), HWLOC_THISSYSTEM="1")
    env.update(env_extra or {})
    p = subprocess.run([DDPRUN, "--nproc-per-node=%d" % nproc] + flags + [WORKER_PATH, out],
                       env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, timeout=60,
                       universal_newlines=True)
    check(p.returncode == expect_rc, "%s: ddprun exited %d, want %d:\n%s" %
          (tag, p.returncode, expect_rc, p.stdout[-3000:]))
    reports = {}
    for rank in range(nproc if expect_rc == 0 else 0):
        with open(os.path.join(out, "rank%d" % rank)) as f:
            reports[rank] = dict(line.strip().split(":", 1) for line in f if ":" in line)
            reports[rank] = {k: v.strip() for k, v in reports[rank].items()}
    return reports, p.stdout


def expect(tag, reports, cpus, policies):
    for rank, want in enumerate(cpus):
        got = reports[rank]
        check(got["Cpus_allowed_list"] == want, "%s: rank %d runs on CPUs %s, want %s" %
              (tag, rank, got["Cpus_allowed_list"], want))
        if policies[rank] is not None:  # None: not checked
            want = policies[rank] if isinstance(policies[rank], tuple) else (policies[rank],)
            check(got["Policy"] in want, "%s: rank %d memory policy '%s', want %s" %
                  (tag, rank, got["Policy"], " or ".join(want)))
        check(got["Mems_allowed_list"] == MEMS, "%s: rank %d Mems_allowed_list %s, want %s" %
              (tag, rank, got["Mems_allowed_list"], MEMS))


def crossed_gpus():
    # Node 1 has memory only on a real 2-node machine; here rank 0's memory stays unbound.
    node1 = MEMS not in ("0", "0-0")
    rank0_memory = preferred(1) if node1 else "default"
    rank0_line = ("local rank 0 (GPU 0, NUMA node 1): CPUs 1, memory " +
                  ("preferred on node(s) 1" if node1 else "unbound"))
    for policy in POLICIES:
        tag = "2n_" + policy
        reports, out = run(tag, ["--numa-binding", policy], "numa_2n_here.xml")
        expect(tag, reports, ["1", "0"], [rank0_memory, preferred(0)])
        check(rank0_line in out, "%s: the agent does not log '%s':\n%s" % (tag, rank0_line, out))


def gpu_order():
    """CUDA_VISIBLE_DEVICES reorders the GPUs; --virtual-local-rank binds by the real local rank."""
    reports, _ = run("2n_cvd", ["--numa-binding", "node"], "numa_2n_here.xml",
                     {"CUDA_VISIBLE_DEVICES": "1,0"})
    expect("2n_cvd", reports, ["0", "1"], [preferred(0), None])
    reports, _ = run("2n_virtual", ["--numa-binding", "node", "--virtual-local-rank"],
                     "numa_2n_here.xml")
    expect("2n_virtual", reports, ["1", "0"], [None, preferred(0)])


def one_node_two_caches():
    for policy in ("exclusive", "core-complex"):
        tag = "1n2l3_" + policy
        reports, _ = run(tag, ["--numa-binding", policy], "numa_1n2l3_here.xml")
        expect(tag, reports, ["0", "1"], [preferred(0), preferred(0)])
    for policy in ("node", "socket"):
        tag = "1n2l3_" + policy
        reports, out = run(tag, ["--numa-binding", policy], "numa_1n2l3_here.xml")
        expect(tag, reports, ["0-1", "0-1"], ["default", "default"])
        line = "--numa-binding %s: nothing to bind: one NUMA node (CPUs 0-1); workers run unbound"
        check(out.count(line % policy) == 1, "%s: no single 'nothing to bind' line:\n%s" %
              (tag, out))


def one_core():
    _, out = run("1core_exclusive", ["--numa-binding", "exclusive"], "numa_1n1core_here.xml",
                 expect_rc=2)
    want = ("--numa-binding exclusive: NUMA node 0 has 1 usable physical core(s) for 2 workers")
    check(want in out and len(out.strip().splitlines()) == 1,
          "exclusive on one core: want the one line '%s', got:\n%s" % (want, out))
    check(not os.listdir(os.path.join(TMP, "1core_exclusive")), "a worker started anyway")
    reports, out = run("1core_cc", ["--numa-binding", "core-complex"], "numa_1n1core_here.xml")
    expect("1core_cc", reports, ["0-1", "0-1"], ["default", "default"])
    check("nothing to bind" in out, "core-complex on one core: no 'nothing to bind':\n" + out)


def unbound():
    reports, _ = run("unbound", [], "numa_2n_here.xml")
    expect("unbound", reports, ["0-1", "0-1"], ["default", "default"])


def dry_run_plans():
    want = {
        "node": ["0-3,16-19", "0-3,16-19", "8-11,24-27"],
        "socket": ["0-7,16-23", "0-7,16-23", "8-15,24-31"],
        "exclusive": ["0-1,16-17", "2-3,18-19", "8-11,24-27"],
        "core-complex": ["0-1,16-17", "2-3,18-19", "8-9,24-25"],
    }
    for policy, cpus in want.items():
        env = dict(os.environ, DDP_NO_SLURM="1",
                   HWLOC_XMLFILE=os.path.join(DATA, "numa_2s4n8g.xml"),
                   CUDA_VISIBLE_DEVICES="0,1,4")
        env.pop("HWLOC_THISSYSTEM", None)
        p = subprocess.run([DDPRUN, "--nproc-per-node=3", "--numa-binding", policy, "--dry-run",
                            "/bin/true"], env=env, stdout=subprocess.PIPE, timeout=60,
                           universal_newlines=True)
        check(p.returncode == 0, "--dry-run %s exited %d" % (policy, p.returncode))
        config = json.loads(p.stdout)
        plan = config["numa_plan"]
        check(config["numa_binding"] == policy, "--dry-run %s: numa_binding %r" %
              (policy, config["numa_binding"]))
        check(plan["outcome"] == "not applied: another machine's topology",
              "--dry-run %s: outcome %r" % (policy, plan["outcome"]))
        got = [w["cpus"] for w in plan["workers"]]
        check(got == cpus, "--dry-run %s: CPUs %s, want %s" % (policy, got, cpus))
        check([w["gpu"] for w in plan["workers"]] == [0, 1, 2], "--dry-run %s: GPUs" % policy)
        check([w["node"] for w in plan["workers"]] == [0, 0, 2], "--dry-run %s: nodes" % policy)


def main():
    global WORKER_PATH, MEMS
    cpus = own_status("Cpus_allowed_list")
    MEMS = own_status("Mems_allowed_list")
    if not cpus.startswith("0-") or "0" not in MEMS.replace("-", ",").split(","):
        print("SKIP: this test needs CPUs 0 and 1 and memory node 0 (it runs on CPUs %s, "
              "memory nodes %s)" % (cpus, MEMS))
        return 77
    WORKER_PATH = os.path.join(TMP, "numa_worker.sh")
    with open(WORKER_PATH, "w") as f:
        f.write(WORKER)
    os.chmod(WORKER_PATH, 0o755)
    for scenario in (unbound, crossed_gpus, gpu_order, one_node_two_caches, one_core,
                     dry_run_plans):
        scenario()
        print("ok: " + scenario.__name__, flush=True)
    return 0


if __name__ == "__main__":
    try:
        sys.exit(main())
    except TestFailure as e:
        print("FAIL: %s" % e)
        sys.exit(1)
