"""Preflight faults between hosts in network namespaces (root only; exit 77 otherwise):
`preflight_netns_test.py FAULT MODE` with FAULT port|version|clock and MODE warn|strict.

ddprund in namespace "d", agents "a" (--node-rank 0, hosting the worker store) and "b"
(--node-rank 1) in namespaces of their own (multinode_harness.Harness.make_netns), one worker each.
The faults:
  port     an nftables rule in a's namespace drops every TCP connection attempt arriving on its
           eth0: b cannot reach the worker store (the "port closed between nodes" failure)
  version  b reports torch 9.9 (DDP_TEST_FINGERPRINT, test-only)
  clock    b's preflight clock runs 5 s ahead (DDP_TEST_CLOCK_OFFSET_MS, test-only)
warn: node rank 0's table flags the fault, b says how many flags there were, the workers run and
both agents exit 0. strict: no worker starts; both agents exit 4 (kPreflightFailedExitCode) with
one line naming the check and the node. Both within a bound of seconds (no 30-minute hang).
"""
import os
import shutil
import socket
import subprocess
import sys
import time

sys.dont_write_bytecode = True  # nothing written into the source tree
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from multinode_harness import RDZV_CONF, c10d, check  # noqa: E402
from multinode_test import main  # noqa: E402

PREFLIGHT_FAILED = 4  # launcher/preflight/preflight.hpp kPreflightFailedExitCode
# Both agents end within this bound: the rendezvous, a 2 s port probe and the workers, on a busy
# 2-core machine.
AGENT_BUDGET_S = 45
NFT_DROP_SYN = """table inet preflight_test {
  chain input {
    type filter hook input priority 0; policy accept;
    iifname "eth0" tcp flags & (syn | ack) == syn drop
  }
}
"""
# What each fault's flag says on node rank 0 (its table) and in strict mode on every node; %s is
# node b: "<host name>, <its namespace IP>" (the namespaces share the host name).
FLAG = {
    "port": "port: node 1 (%s) cannot connect to the worker store",
    "version": "version: torch differs between nodes: 1.13",
    "clock": "clock: node 1 (%s)'s clock is 5.0 s ahead of node 0's",
}


def block_inbound_tcp(ns):
    subprocess.run(["nsenter", "--net=/run/netns/" + ns, "nft", "-f", "-"], input=NFT_DROP_SYN,
                   text=True, check=True)


def scenario(h, fault, mode):
    ips = h.make_netns(["d", "a", "b"])
    if fault == "port":
        block_inbound_tcp(ips["a"][0])
    port = h.ddprund(netns=ips["d"][0], host=ips["d"][1])
    env_b = {"version": {"DDP_TEST_FINGERPRINT": "torch=9.9"},
             "clock": {"DDP_TEST_CLOCK_OFFSET_MS": "5000"}}.get(fault, {})
    agents = {}
    started = time.monotonic()
    for name, rank, env in (("a", 0, {}), ("b", 1, env_b)):
        flags = c10d(port, 2, 1, run_id="pf" + fault, host=ips["d"][1], conf=RDZV_CONF,
                     extra=["--node-rank", str(rank), "--local-addr", ips[name][1],
                            "--preflight", mode])
        agents[name] = h.agent(name, flags, env, netns=ips[name][0])
    rcs = {n: h.wait_exit(p, n, AGENT_BUDGET_S) for n, p in agents.items()}
    h.log("agents exited %s after %.1f s" % (rcs, time.monotonic() - started))
    flag = FLAG[fault].replace("%s", "%s, %s" % (socket.gethostname(), ips["b"][1]))
    table = h.output("a")
    check("FLAG " + flag in table, "node rank 0's table has no flag '%s':\n%s" % (flag, table[-3000:]))
    if mode == "warn":
        for n, rc in rcs.items():
            check(rc == 0, "agent %s exited %d in warn mode:\n%s" % (n, rc, h.output(n)[-3000:]))
        check(sorted(r["node"] for r in h.records()) == ["a", "b"],
              "warn mode: the workers did not run on both nodes: %s" % h.records())
        check("flag(s), the first: " + flag in h.output("b"),
              "node b does not say the round had flags:\n%s" % h.output("b")[-3000:])
    else:
        for n, rc in rcs.items():
            check(rc == PREFLIGHT_FAILED, "agent %s exited %d, want %d:\n%s" %
                  (n, rc, PREFLIGHT_FAILED, h.output(n)[-3000:]))
            line = "preflight failed in generation 0, no worker started: " + flag
            check(line in h.output(n), "agent %s does not say '%s':\n%s" %
                  (n, line, h.output(n)[-3000:]))
        check(not h.records(), "strict mode: workers ran: %s" % h.records())


SCENARIOS = {"%s_%s" % (fault, mode): (lambda h, f=fault, m=mode: scenario(h, f, m))
             for fault in FLAG for mode in ("warn", "strict")}

if __name__ == "__main__":
    if os.geteuid() != 0 or not all(shutil.which(t) for t in ("ip", "nsenter", "nft")):
        print("SKIP: needs root, ip, nsenter and nft (Debian nftables)")
        sys.exit(77)
    sys.exit(main(sys.argv, SCENARIOS))
