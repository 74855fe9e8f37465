// NUMA binding policies (--numa-binding, torchrun's torch/numa/binding.py): which CPUs and which
// NUMA memory nodes each local worker is bound to, computed from a plain description of the
// machine (CpuTopology).
//
// Placement: local rank i uses visible GPU i (i modulo the GPU count when there are more workers
// than GPUs) and is placed on that GPU's NUMA node; without GPUs, local rank i goes to the i-th
// NUMA node that has a usable CPU, round-robin. Then, as torchrun:
//   node          every usable CPU of that NUMA node
//   socket        every usable CPU of every NUMA node of that node's socket
//   exclusive     the node's physical cores split evenly between the workers placed on it, in
//                 local-rank order, the lowest ranks getting one extra core when it does not
//                 divide; no two workers share a core (all hardware threads of a core go together)
//   core-complex  one last-level-cache domain (L3: a core complex) of the node per worker, the
//                 domains with the most usable CPUs first, reused round-robin when the node has
//                 fewer domains than workers
// "Usable" CPUs are those in `allowed` (the agent's own affinity mask, so taskset, Slurm and
// cgroup limits hold). Memory goes to the NUMA nodes whose CPUs the worker got (node, exclusive,
// core-complex: its node; socket: the socket's nodes that have usable CPUs).
// One deviation from torchrun: exclusive and core-complex share a node between the workers placed
// on it, not between all GPUs attached to it, so --nproc-per-node below the GPU count leaves no
// core idle.
//
// Pure: no I/O, no logging (numa_topology.hpp reads a CpuTopology through hwloc; numa_setup.hpp
// turns a plan into what each worker's guardian applies).
//
// Thread safety: plain values and pure functions.
#pragma once

#include <optional>
#include <string>
#include <vector>

namespace ddp {

enum class NumaPolicy { kNone, kNode, kSocket, kExclusive, kCoreComplex };

// "node", "socket", "exclusive", "core-complex"; "" for kNone.
const char* numaPolicyName(NumaPolicy policy);
// The inverse of numaPolicyName for the four policies. Throws ConfigError listing them otherwise.
NumaPolicy parseNumaPolicy(const std::string& text);

// OS indices (CPUs or NUMA nodes), ascending, without repeats.
using IndexList = std::vector<unsigned>;

// The kernel's list format: "0-3,8,10-11" ("" for none).
std::string formatIndexList(const IndexList& list);

struct NumaNodeInfo {
  unsigned id = 0;       // the kernel's node number
  unsigned package = 0;  // OS index of the socket (package) that holds it
  IndexList cpus;        // its CPUs (hardware threads); empty for a memory-only node
};

struct CpuTopology {
  std::vector<NumaNodeInfo> nodes;              // ascending id
  std::vector<IndexList> cores;                 // the hardware threads of each physical core
  std::vector<IndexList> coreComplexes;         // the CPUs sharing each last-level cache
  std::vector<std::optional<unsigned>> gpuNodes;  // NUMA node of visible GPU i; nullopt: unknown
};

struct WorkerBinding {
  int localRank = 0;
  std::optional<int> gpu;         // the GPU that placed it (nullopt: CPU-only round-robin)
  std::optional<unsigned> node;   // the NUMA node it was placed on
  IndexList cpus;                 // empty: the worker stays unbound (`note` says why)
  IndexList memNodes;             // NUMA nodes its memory should come from
  std::string note;
};

struct NumaPlan {
  std::vector<WorkerBinding> workers;  // one per local rank, in order
  // The CPUs every set was taken from: `allowed` within the topology's CPUs.
  IndexList usableCpus;
  // True when binding changes nothing: every worker would get all usable CPUs and all NUMA nodes
  // with usable CPUs (one NUMA node, or a policy that spans them all).
  bool nothingToBind = false;
};

// The plan for `workers` local ranks under `policy` (not kNone). `allowed` empty = every CPU of
// the topology is usable. Throws ConfigError when exclusive finds fewer usable physical cores on a
// node than workers placed on it (no exclusive split exists).
NumaPlan planNumaBinding(const CpuTopology& topology, NumaPolicy policy, int workers,
                         const IndexList& allowed);

}  // namespace ddp
