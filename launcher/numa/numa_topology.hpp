// Reading the machine for NUMA binding through hwloc: NUMA nodes and their sockets, physical cores,
// last-level-cache domains, and the NUMA node of each GPU this process may use (CpuTopology,
// numa_binding.hpp).
//
// The topology is this machine's, unless HWLOC_XMLFILE (an XML export, e.g. `lstopo t.xml`) or
// HWLOC_SYNTHETIC (e.g. "pack:2 [numa] core:4 pu:2") names another; hwloc itself decides whether
// that one describes this machine (HWLOC_THISSYSTEM=1 says it does).
//
// GPUs, in the order CUDA numbers them, first found wins:
//   1. the CUDA driver (libcuda, loaded at run time), on this machine only: each device's PCI bus
//      id, looked up among hwloc's PCI devices; it honours CUDA_VISIBLE_DEVICES itself;
//   2. hwloc's CUDA OS devices ("cuda0", "cuda1", ...: its CUDA plugin, or an XML export made with
//      it), in number order;
//   3. NVIDIA PCI display/3D controllers (vendor 0x10de, class 0x03xx), in PCI bus order (CUDA's
//      order with CUDA_DEVICE_ORDER=PCI_BUS_ID, and for identical GPUs its default order too).
// For 2 and 3 CUDA_VISIBLE_DEVICES is applied by hand (nproc.hpp's grammar); a GPU named there by
// UUID cannot be placed without the driver, and its NUMA node is unknown. A GPU's NUMA node is the
// node of the smallest CPU-side object hwloc attaches it to; when that object holds several
// nodes, the first (a note says so).
//
// Thread safety: readTopology may be called from any thread; it initialises CUDA's driver in the
// process (no context), as nproc.hpp's GPU count does, which is safe before fork + exec.
#pragma once

#include <string>
#include <vector>

#include "launcher/numa/nproc.hpp"
#include "launcher/numa/numa_binding.hpp"

namespace ddp {

struct TopologyReading {
  CpuTopology topology;
  // False when the topology is another machine's (HWLOC_XMLFILE / HWLOC_SYNTHETIC without
  // HWLOC_THISSYSTEM=1): a plan made from it must not be applied here.
  bool thisSystem = true;
  // "this machine", "HWLOC_XMLFILE=<path>" or "HWLOC_SYNTHETIC=<description>".
  std::string source;
  // Where the GPUs came from ("the CUDA driver", ...; "no GPU" when none was found).
  std::string gpuSource;
  // One line per oddity worth telling the user (a GPU local to several nodes, a UUID in
  // CUDA_VISIBLE_DEVICES, a driver GPU missing from the topology).
  std::vector<std::string> notes;
};

// Reads the topology (see the file comment), taking HWLOC_XMLFILE, HWLOC_SYNTHETIC and
// CUDA_VISIBLE_DEVICES from `getenv`. Blocks for hwloc's discovery (milliseconds to tens of
// milliseconds) and the CUDA driver's initialisation (hundreds of ms on a GPU host). Throws
// ConfigError naming the variable when HWLOC_XMLFILE or HWLOC_SYNTHETIC cannot be loaded, or
// saying that hwloc cannot read this machine.
TopologyReading readTopology(const EnvLookup& getenv = processEnv);

}  // namespace ddp
