#include "launcher/numa/numa_binding.hpp"

#include <algorithm>
#include <iterator>
#include <map>

#include "rendezvous/base/error.hpp"

namespace ddp {
namespace {

IndexList intersect(const IndexList& a, const IndexList& b) {
  IndexList out;
  std::set_intersection(a.begin(), a.end(), b.begin(), b.end(), std::back_inserter(out));
  return out;
}

IndexList unite(const IndexList& a, const IndexList& b) {
  IndexList out;
  std::set_union(a.begin(), a.end(), b.begin(), b.end(), std::back_inserter(out));
  return out;
}

// The CPUs of every node, within `allowed` (empty = no restriction).
IndexList usableCpus(const CpuTopology& t, const IndexList& allowed) {
  IndexList all;
  for (const auto& node : t.nodes) all = unite(all, node.cpus);
  return allowed.empty() ? all : intersect(all, allowed);
}

const NumaNodeInfo* findNode(const CpuTopology& t, unsigned id) {
  for (const auto& node : t.nodes)
    if (node.id == id) return &node;
  return nullptr;
}

IndexList nodeCpus(const CpuTopology& t, unsigned id, const IndexList& usable) {
  const NumaNodeInfo* node = findNode(t, id);
  return node == nullptr ? IndexList{} : intersect(node->cpus, usable);
}

// Groups `cpus` by the group of `groups` holding each (keyed by the group's lowest CPU, its
// identity); a CPU in no group is a group of its own.
std::map<unsigned, IndexList> groupBy(const IndexList& cpus, const std::vector<IndexList>& groups) {
  std::map<unsigned, unsigned> keyOf;
  for (const auto& group : groups)
    for (unsigned cpu : group) keyOf.emplace(cpu, group.empty() ? cpu : group.front());
  std::map<unsigned, IndexList> out;
  for (unsigned cpu : cpus) {
    auto it = keyOf.find(cpu);
    out[it == keyOf.end() ? cpu : it->second].push_back(cpu);
  }
  return out;
}

// Where each local rank goes: its GPU's node, or round-robin over the nodes with usable CPUs.
void place(const CpuTopology& t, const IndexList& usable, std::vector<WorkerBinding>& workers) {
  const auto gpus = static_cast<int>(t.gpuNodes.size());
  IndexList cpuNodes;
  for (const auto& node : t.nodes)
    if (!intersect(node.cpus, usable).empty()) cpuNodes.push_back(node.id);
  for (auto& w : workers) {
    if (gpus > 0) {
      w.gpu = w.localRank % gpus;
      w.node = t.gpuNodes[*w.gpu];
      if (!w.node) w.note = "the NUMA node of GPU " + std::to_string(*w.gpu) + " is unknown";
    } else if (!cpuNodes.empty()) {
      w.node = cpuNodes[w.localRank % cpuNodes.size()];
    } else {
      w.note = "no NUMA node has a CPU this agent may use";
    }
  }
}

// The local ranks placed on `node`, ascending, and where `rank` is among them.
int indexAmongSharers(const std::vector<WorkerBinding>& workers, unsigned node, int rank,
                      int& sharers) {
  int index = 0;
  sharers = 0;
  for (const auto& w : workers) {
    if (!w.node || *w.node != node) continue;
    if (w.localRank == rank) index = sharers;
    ++sharers;
  }
  return index;
}

void bindSocket(const CpuTopology& t, const IndexList& usable, WorkerBinding& w) {
  const unsigned package = findNode(t, *w.node)->package;
  for (const auto& node : t.nodes) {
    const IndexList cpus = intersect(node.cpus, usable);
    if (node.package != package || cpus.empty()) continue;
    w.cpus = unite(w.cpus, cpus);
    w.memNodes.push_back(node.id);
  }
}

void bindExclusive(const CpuTopology& t, const IndexList& cpus, int index, int sharers,
                   WorkerBinding& w) {
  const auto cores = groupBy(cpus, t.cores);
  const int count = static_cast<int>(cores.size());
  if (count < sharers) {
    throw ConfigError("--numa-binding exclusive: NUMA node " + std::to_string(*w.node) + " has " +
                      std::to_string(count) + " usable physical core(s) for " +
                      std::to_string(sharers) + " workers");
  }
  const int each = count / sharers, extra = count % sharers;
  const int begin = index * each + std::min(index, extra);
  const int end = begin + each + (index < extra ? 1 : 0);
  auto it = std::next(cores.begin(), begin);
  for (int i = begin; i < end; ++i, ++it) w.cpus = unite(w.cpus, it->second);
}

void bindCoreComplex(const CpuTopology& t, const IndexList& cpus, int index, WorkerBinding& w) {
  std::vector<IndexList> domains;
  for (auto& [key, group] : groupBy(cpus, t.coreComplexes)) domains.push_back(group);
  // With no cache information the node is one domain.
  if (t.coreComplexes.empty()) domains = {cpus};
  std::stable_sort(domains.begin(), domains.end(), [](const IndexList& a, const IndexList& b) {
    return a.size() > b.size();  // most usable CPUs first; ties stay in CPU order
  });
  w.cpus = domains[index % domains.size()];
}

void bindWorker(const CpuTopology& t, NumaPolicy policy, const IndexList& usable,
                const std::vector<WorkerBinding>& all, WorkerBinding& w) {
  const IndexList cpus = nodeCpus(t, *w.node, usable);
  if (cpus.empty()) {
    w.note = "NUMA node " + std::to_string(*w.node) + " has no CPU this agent may use";
    return;
  }
  int sharers = 0;
  const int index = indexAmongSharers(all, *w.node, w.localRank, sharers);
  switch (policy) {
    case NumaPolicy::kNode: w.cpus = cpus; break;
    case NumaPolicy::kSocket: bindSocket(t, usable, w); return;
    case NumaPolicy::kExclusive: bindExclusive(t, cpus, index, sharers, w); break;
    case NumaPolicy::kCoreComplex: bindCoreComplex(t, cpus, index, w); break;
    case NumaPolicy::kNone: return;
  }
  w.memNodes = {*w.node};
}

bool changesNothing(const CpuTopology& t, const NumaPlan& plan) {
  IndexList cpuNodes;
  for (const auto& node : t.nodes)
    if (!intersect(node.cpus, plan.usableCpus).empty()) cpuNodes.push_back(node.id);
  return std::all_of(plan.workers.begin(), plan.workers.end(), [&](const WorkerBinding& w) {
    return w.cpus.empty() || (w.cpus == plan.usableCpus && w.memNodes == cpuNodes);
  });
}

}  // namespace

const char* numaPolicyName(NumaPolicy policy) {
  switch (policy) {
    case NumaPolicy::kNone: return "";
    case NumaPolicy::kNode: return "node";
    case NumaPolicy::kSocket: return "socket";
    case NumaPolicy::kExclusive: return "exclusive";
    case NumaPolicy::kCoreComplex: return "core-complex";
  }
  return "";
}

NumaPolicy parseNumaPolicy(const std::string& text) {
  for (auto p : {NumaPolicy::kNode, NumaPolicy::kSocket, NumaPolicy::kExclusive,
                 NumaPolicy::kCoreComplex}) {
    if (text == numaPolicyName(p)) return p;
  }
  throw ConfigError("must be one of node, socket, exclusive, core-complex");
}

std::string formatIndexList(const IndexList& list) {
  std::string out;
  for (std::size_t i = 0; i < list.size();) {
    std::size_t j = i;
    while (j + 1 < list.size() && list[j + 1] == list[j] + 1) ++j;
    out += (out.empty() ? "" : ",") + std::to_string(list[i]);
    if (j > i) out += "-" + std::to_string(list[j]);
    i = j + 1;
  }
  return out;
}

NumaPlan planNumaBinding(const CpuTopology& topology, NumaPolicy policy, int workers,
                         const IndexList& allowed) {
  NumaPlan plan;
  plan.usableCpus = usableCpus(topology, allowed);
  for (int rank = 0; rank < workers; ++rank) {
    plan.workers.emplace_back();
    plan.workers.back().localRank = rank;
  }
  place(topology, plan.usableCpus, plan.workers);
  for (auto& w : plan.workers) {
    if (w.node && findNode(topology, *w.node) == nullptr) {
      w.note = "NUMA node " + std::to_string(*w.node) + " is not in the topology";
    } else if (w.node) {
      bindWorker(topology, policy, plan.usableCpus, plan.workers, w);
    }
  }
  plan.nothingToBind = changesNothing(topology, plan);
  return plan;
}

}  // namespace ddp
