"""Writes the hwloc XML topologies the --numa-binding tests read (run it to regenerate them):

  numa_2s4n8g.xml   2 sockets x 2 NUMA nodes, each node 4 cores in 2 L3 domains, 2 hardware
                    threads per core numbered as Linux does (core c: CPUs c and c+16), and 2 NVIDIA
                    GPUs per node as PCI devices with hwloc's CUDA OS devices (cuda0..cuda7): GPU g
                    is on NUMA node g // 2.
  numa_2n_here.xml  2 sockets, one NUMA node each, one core and CPU each (CPUs 0 and 1: they exist
                    on any machine with 2 CPUs), GPUs crossed: GPU 0 on node 1 (CPU 1), GPU 1 on
                    node 0 (CPU 0). As PCI devices only (no OS devices: the bus-order fallback).
  numa_1n2l3_here.xml  1 socket, 1 NUMA node, 2 cores (CPUs 0 and 1), each in its own L3 domain.
  numa_1n1core_here.xml  1 socket, 1 NUMA node, 1 core with 2 hardware threads (CPUs 0 and 1).

hwloc reads them with HWLOC_XMLFILE=<file> (HWLOC_THISSYSTEM=1 to apply the plan on this machine).
"""
import os

HERE = os.path.dirname(os.path.abspath(__file__))


def mask(cpus):
    bits = 0
    for c in cpus:
        bits |= 1 << c
    words = []
    while True:
        words.append("0x%08x" % (bits & 0xffffffff))
        bits >>= 32
        if not bits:
            break
    return ",".join(reversed(words))


class Writer:
    def __init__(self):
        self.lines = ['<?xml version="1.0" encoding="UTF-8"?>',
                      '<!DOCTYPE topology SYSTEM "hwloc2.dtd">', '<topology version="2.0">']
        self.depth = 1
        self.gp = 0

    def open(self, kind, attrs="", close=False):
        self.gp += 1
        self.lines.append("  " * self.depth + '<object type="%s" %sgp_index="%d"%s>' %
                          (kind, attrs + " " if attrs else "", self.gp, "/" if close else ""))
        if not close:
            self.depth += 1

    def close(self):
        self.depth -= 1
        self.lines.append("  " * self.depth + "</object>")

    def sets(self, cpus, nodes):
        return 'cpuset="%s" complete_cpuset="%s" nodeset="%s" complete_nodeset="%s"' % (
            mask(cpus), mask(cpus), mask(nodes), mask(nodes))

    def gpu(self, bus, cuda):
        self.open("Bridge", 'bridge_type="0-1" depth="0" bridge_pci="0000:[%02x-%02x]"' % (bus, bus))
        self.open("PCIDev", 'pci_busid="0000:%02x:00.0" pci_type="0302 [10de:2330] [10de:16c1] a1" '
                  'pci_link_speed="0.000000"' % bus)
        if cuda is not None:
            self.open("OSDev", 'name="cuda%d" subtype="CUDA" osdev_type="5"' % cuda, close=True)
        self.close()
        self.close()

    def text(self):
        return "\n".join(self.lines + ["</topology>", ""])


def write(name, packages):
    """packages: [[node, ...], ...]; node = (id, [(l3 cpus-per-core lists)], [(bus, cuda)])."""
    w = Writer()
    every_cpu = [c for p in packages for n in p for l3 in n[1] for core in l3 for c in core]
    every_node = [n[0] for p in packages for n in p]
    w.open("Machine", 'os_index="0" ' + w.sets(every_cpu, every_node))
    for index, package in enumerate(packages):
        cpus = [c for n in package for l3 in n[1] for core in l3 for c in core]
        w.open("Package", 'os_index="%d" ' % index + w.sets(cpus, [n[0] for n in package]))
        for node, l3s, gpus in package:
            node_cpus = [c for l3 in l3s for core in l3 for c in core]
            parent = len(package) > 1
            if parent:  # a Group (a die) per NUMA node of the socket
                w.open("Group", w.sets(node_cpus, [node]))
            w.open("NUMANode", 'os_index="%d" %s local_memory="1073741824"' %
                   (node, w.sets(node_cpus, [node])), close=True)
            for l3 in l3s:
                l3_cpus = [c for core in l3 for c in core]
                w.open("L3Cache", w.sets(l3_cpus, [node]) + ' cache_size="33554432" depth="3" '
                       'cache_linesize="64" cache_associativity="0" cache_type="0"')
                for core in l3:
                    w.open("Core", 'os_index="%d" ' % core[0] + w.sets(core, [node]))
                    for c in core:
                        w.open("PU", 'os_index="%d" ' % c + w.sets([c], [node]), close=True)
                    w.close()
                w.close()
            for bus, cuda in gpus:
                w.gpu(bus, cuda)
            if parent:
                w.close()
        w.close()
    w.close()
    with open(os.path.join(HERE, name), "w") as f:
        f.write(w.text())


def big():
    packages = []
    for p in range(2):
        nodes = []
        for n in (2 * p, 2 * p + 1):
            cores = [[c, c + 16] for c in range(4 * n, 4 * n + 4)]
            # GPU g on bus 0x10 + 0x10*g; cuda numbering follows bus order
            gpus = [(0x10 + 0x10 * g, g) for g in (2 * n, 2 * n + 1)]
            nodes.append((n, [cores[:2], cores[2:]], gpus))
        packages.append(nodes)
    write("numa_2s4n8g.xml", packages)


write("numa_2n_here.xml", [[(0, [[[0]]], [(0x20, None)])], [(1, [[[1]]], [(0x10, None)])]])
write("numa_1n2l3_here.xml", [[(0, [[[0]], [[1]]], [])]])
write("numa_1n1core_here.xml", [[(0, [[[0, 1]]], [])]])
big()
