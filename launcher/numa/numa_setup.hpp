// NumaSetup: --numa-binding resolved for this node, once, before any worker starts: the topology
// (numa_topology.hpp), the plan (numa_binding.hpp) and, per local rank, the CpuBinding its guardian
// applies (cpu_binding.hpp), with the lines the agent logs and --dry-run shows.
//
// What is applied:
//   * nothing, with one "nothing to bind" line, when the plan changes nothing (one NUMA node, or a
//     policy that spans every node);
//   * nothing, with a line saying so, when the topology is not this machine's (HWLOC_XMLFILE /
//     HWLOC_SYNTHETIC without HWLOC_THISSYSTEM=1): the plan is shown, not applied;
//   * otherwise each worker's CPU set, taken from the agent's own affinity mask, and a preferred
//     memory policy on its NUMA nodes, less the nodes this process may not allocate from (its
//     cpuset's mems); a worker whose nodes are all unusable keeps its memory unbound (a line says
//     so), and one without usable CPUs stays unbound altogether.
//
// Thread safety: a plain value; setupNumaBinding may be called from any thread.
#pragma once

#include <optional>
#include <string>
#include <vector>

#include "launcher/numa/cpu_binding.hpp"
#include "launcher/numa/nproc.hpp"
#include "launcher/numa/numa_binding.hpp"

namespace ddp {

struct NumaSetup {
  NumaPolicy policy = NumaPolicy::kNone;
  std::string topologySource;  // see TopologyReading
  bool thisSystem = true;
  std::string gpuSource;
  NumaPlan plan;  // memNodes: the nodes actually applied (usable ones only, on this machine)
  // "bound", "nothing to bind" or "not applied: another machine's topology" ("" for kNone).
  std::string outcome;
  // Per local rank when bound (nullopt: that worker stays unbound); empty otherwise.
  std::vector<std::optional<CpuBinding>> bindings;
  // What the agent logs at info, in order: a header, the plan per local rank, the notes.
  std::vector<std::string> lines;

  // The binding local rank `localRank` gets; nullopt when it stays unbound.
  std::optional<CpuBinding> bindingFor(int localRank) const;
};

// Resolves `policy` for `workers` local ranks (kNone: returns at once, nothing read). Blocks and
// throws as readTopology() (numa_topology.hpp) and planNumaBinding() (ConfigError when exclusive
// has fewer cores than workers on a node).
NumaSetup setupNumaBinding(NumaPolicy policy, int workers, const EnvLookup& getenv = processEnv);

}  // namespace ddp
