"""The addresses a node has, in network namespaces (root only; exit 77 otherwise):

  addresses_netns_test.py multi_nic|nat|ipv6_only

multi_nic  (pytorch#64926) nodes a and b joined by two links, each node advertising its address on
           a different one (--local-addr), so that b reaches node rank 0's MASTER_ADDR from
           another address than the one it advertises: the reference trainer runs to completion
           across them, both nodes' workers are served by the worker store, and a client in a
           third namespace c (linked to a, no node) is refused, with the refusal in a's log
a node b behind a NAT router r: node rank 0 sees b's connections come from r's address, which
           no node has, and refuses them; b's own log says it was refused by the allowlist and how
           to widen it; with --rdzv-conf store_allow=<r's address> the same job is served
ipv6_only  a namespace whose loopback has only ::1: `ddprun --standalone` runs the reference
           trainer and a torch 1.13 gloo all_reduce (MASTER_ADDR=::1)

Namespaces, links and subnets are named from this pid; everything is deleted on every exit path.
Exit 0 pass, 1 fail (with the logs), 77 skipped.
"""
import os
import shutil
import subprocess
import sys

sys.dont_write_bytecode = True  # nothing written into the source tree
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from multinode_harness import (BIN, PY, RDZV_CONF, TMP, WORKER, c10d, check,  # noqa: E402
                               netns_lock, poll, run, train_config)
from multinode_test import main  # noqa: E402
from security_test import REFUSED, ddprund, foreign, release, wait_ok  # noqa: E402

REFUSAL = "refused this node's connection"


def net(k):
    """The k-th /24 of this test: 10.<218+k>.<pid>."""
    return "10.%d.%d" % (218 + k, os.getpid() % 250 + 1)


def namespaces(h, names):
    """One namespace per name (lo up), deleted by the harness; returns {name: namespace}."""
    tag = "%x" % (os.getpid() % 0xFFFF)
    out = {}
    with netns_lock():
        for name in names:
            ns = "ad%s%s" % (tag, name)
            run(["ip", "netns", "add", ns])
            h.netns.append(ns)
            run(["ip", "-n", ns, "link", "set", "lo", "up"])
            out[name] = ns
    return out


def link(ns1, if1, ip1, ns2, if2, ip2):
    """A veth pair between two namespaces, each end with its /24 address."""
    run(["ip", "link", "add", if1, "netns", ns1, "type", "veth", "peer", "name", if2, "netns", ns2])
    for ns, ifname, ip in ((ns1, if1, ip1), (ns2, if2, ip2)):
        run(["ip", "-n", ns, "addr", "add", ip + "/24", "dev", ifname])
        run(["ip", "-n", ns, "link", "set", ifname, "up"])


def in_ns(ns, argv):
    return ["nsenter", "--net=/run/netns/" + ns] + argv


def agent(h, name, ns, port, host, rank, local_addr, env_extra=None, conf=RDZV_CONF, program=None):
    """A 2-node c10d agent with --node-rank and --local-addr; multinode_worker.py unless
    `program` (argv) is given."""
    env = dict(os.environ, MN_DIR=TMP, MN_NODE=name, PYTHON_EXEC=PY, DDP_NO_SLURM="1")
    env.update(env_extra or {})
    flags = c10d(port, 2, 1, run_id="addrjob", host=host, conf=conf,
                 extra=["--node-rank", str(rank), "--local-addr", local_addr])
    argv = [os.path.join(BIN, "ddprun")] + flags + ["--shutdown-timeout", "5"] + (program or [WORKER])
    return h.spawn(name, in_ns(ns, argv), env)


def scenario_multi_nic(h):
    ns = namespaces(h, ["a", "b", "c"])
    link(ns["a"], "eth0", net(0) + ".1", ns["b"], "eth0", net(0) + ".2")
    link(ns["a"], "eth1", net(1) + ".1", ns["b"], "eth1", net(1) + ".2")
    link(ns["a"], "eth2", net(2) + ".1", ns["c"], "eth0", net(2) + ".2")
    run(["ip", "-n", ns["c"], "route", "add", net(1) + ".0/24", "via", net(2) + ".1"])
    host = net(0) + ".1"
    port = ddprund(h, [], netns=ns["a"], host=host)
    # Node a advertises its second link, b its first: b reaches MASTER_ADDR (a's second link)
    # from its own second-link address, which it does not advertise.
    master, b_adv = net(1) + ".1", net(0) + ".2"
    config = train_config(512, 8, 2)
    train = [os.path.join(BIN, "train"), "--config", config]
    agents = {"a": agent(h, "a", ns["a"], port, host, 0, master, program=train),
              "b": agent(h, "b", ns["b"], port, host, 1, b_adv, program=train)}
    wait_ok(h, agents, 60)
    check(any("done: " in h.output(n) for n in agents),
          "the trainer did not report completion:\n%s" % h.output("a")[-2000:])
    # The same nodes, workers that ask the worker store, and a foreign client meanwhile.
    go = os.path.join(TMP, "go")
    env = {"MN_GO_FILE": go, "MN_PING": "1"}
    agents = {"a2": agent(h, "a2", ns["a"], port, host, 0, master, env),
              "b2": agent(h, "b2", ns["b"], port, host, 1, b_adv, env)}
    recs = poll("a 2-node generation", lambda: h.generation_with_world(2, ["a2", "b2"]), 40)
    check(all(r["MASTER_ADDR"] == master for r in recs), "MASTER_ADDR is not %s: %s" % (master, recs))
    check(all(r["ping"] for r in recs), "a node's worker was refused by the worker store: %s" % recs)
    check(foreign(h, master, int(recs[0]["MASTER_PORT"]), netns=ns["c"]) == REFUSED,
          "a client from namespace c (no node of the job) was served by the worker store")
    release(go, 2)
    wait_ok(h, agents)
    check("refused a connection from %s" % (net(2) + ".2") in h.output("a2"),
          "node rank 0 logged no refusal of namespace c:\n" + h.output("a2")[-3000:])
    check(REFUSAL not in h.output("b2"), "node b was told it was refused:\n" + h.output("b2")[-2000:])


def scenario_nat(h):
    ns = namespaces(h, ["a", "r", "b"])
    link(ns["a"], "eth0", net(0) + ".1", ns["r"], "eth0", net(0) + ".254")
    link(ns["r"], "eth1", net(1) + ".254", ns["b"], "eth0", net(1) + ".2")
    run(["ip", "-n", ns["b"], "route", "add", "default", "via", net(1) + ".254"])
    run(in_ns(ns["r"], ["sysctl", "-q", "-w", "net.ipv4.ip_forward=1"]))
    nat = ("table ip nat {\n  chain post {\n    type nat hook postrouting priority 100;\n"
           "    oifname \"eth0\" masquerade;\n  }\n}\n")
    subprocess.run(in_ns(ns["r"], ["nft", "-f", "-"]), input=nat, text=True, check=True)
    host, router = net(0) + ".1", net(0) + ".254"
    port = ddprund(h, [], netns=ns["a"], host=host)
    env = {"MN_PING": "1"}
    agents = {"a": agent(h, "a", ns["a"], port, host, 0, host, env),
              "b": agent(h, "b", ns["b"], port, host, 1, net(1) + ".2", env)}
    wait_ok(h, agents)
    b_log = h.output("b")
    check(REFUSAL in b_log and "store_allow=" + net(1) + ".2" in b_log and "NAT" in b_log,
          "node b's log does not say it was refused and how to widen the allowlist:\n" + b_log[-3000:])
    check("refused a connection from %s" % router in h.output("a"),
          "node rank 0 logged no refusal of the router's address:\n" + h.output("a")[-3000:])
    recs = h.records()
    check(sorted(r["ping"] for r in recs) == [False, True],
          "want b's worker refused and a's served: %s" % recs)
    # Widened as the line says (with the address node rank 0 saw): served.
    conf = RDZV_CONF + ",store_allow=%s/32" % router
    agents = {"a2": agent(h, "a2", ns["a"], port, host, 0, host, env, conf),
              "b2": agent(h, "b2", ns["b"], port, host, 1, net(1) + ".2", env, conf)}
    wait_ok(h, agents)
    check(REFUSAL not in h.output("b2"), "node b was refused despite store_allow:\n" + h.output("b2")[-2000:])
    recs = [r for r in h.records() if r["node"] in ("a2", "b2")]
    check(len(recs) == 2 and all(r["ping"] for r in recs), "store_allow did not serve b: %s" % recs)


def scenario_ipv6_only(h):
    ns = namespaces(h, ["v"])["v"]
    run(["ip", "-n", ns, "addr", "del", "127.0.0.1/8", "dev", "lo"])
    lo = subprocess.run(["ip", "-n", ns, "addr", "show", "dev", "lo"], capture_output=True,
                        text=True, check=True).stdout
    check("127.0.0.1" not in lo and "::1" in lo, "namespace loopback is not ::1 only:\n" + lo)
    config = train_config(512, 8, 2)
    ddprun = [os.path.join(BIN, "ddprun"), "--standalone", "--nproc-per-node", "2",
              "--shutdown-timeout", "5"]
    p = h.spawn("train", in_ns(ns, ddprun + [os.path.join(BIN, "train"), "--config", config]))
    rc = h.wait_exit(p, "train", 60)
    check(rc == 0 and "done: " in h.output("train"),
          "the standalone trainer exited %d:\n%s" % (rc, h.output("train")[-3000:]))
    # torch 1.13: its gloo device on the interface that has the address (no 127.0.0.1 to fall back on).
    env = dict(os.environ, MN_DIR=TMP, MN_NODE="t", MN_TORCH="1", PYTHON_EXEC=PY,
               GLOO_SOCKET_IFNAME="lo")
    p = h.spawn("torch", in_ns(ns, ddprun + [WORKER]), env)
    rc = h.wait_exit(p, "torch", 60)
    recs = h.records()
    check(rc == 0 and len(recs) == 2, "the standalone torch job exited %d with %d records:\n%s" %
          (rc, len(recs), h.output("torch")[-3000:]))
    check(all(r["MASTER_ADDR"] == "::1" and r["allreduce"] == 3.0 for r in recs),
          "want MASTER_ADDR=::1 and all_reduce 3: %s" % recs)


if __name__ == "__main__":
    if os.geteuid() != 0 or not shutil.which("ip") or not shutil.which("nsenter"):
        print("SKIP: needs root, ip and nsenter")
        sys.exit(77)
    if len(sys.argv) == 2 and sys.argv[1] == "nat" and not shutil.which("nft"):
        print("SKIP: needs nft for the NAT router")
        sys.exit(77)
    sys.exit(main(sys.argv, {
        "multi_nic": scenario_multi_nic,
        "nat": scenario_nat,
        "ipv6_only": scenario_ipv6_only,
    }))
