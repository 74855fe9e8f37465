#include "launcher/numa/numa_setup.hpp"

#include <algorithm>
#include <iterator>

#include "launcher/numa/numa_topology.hpp"

namespace ddp {
namespace {

std::string describeWorker(const WorkerBinding& w) {
  std::string where;
  if (w.gpu) where += "GPU " + std::to_string(*w.gpu) + ", ";
  if (w.node) where += "NUMA node " + std::to_string(*w.node);
  std::string line = "local rank " + std::to_string(w.localRank) +
                     (where.empty() ? "" : " (" + where + ")") + ": ";
  if (w.cpus.empty()) return line + "unbound: " + w.note;
  line += "CPUs " + formatIndexList(w.cpus) + ", memory ";
  line += w.memNodes.empty() ? "unbound" : "preferred on node(s) " + formatIndexList(w.memNodes);
  return line + (w.note.empty() ? "" : " (" + w.note + ")");
}

std::string nothingToBindLine(const CpuTopology& t, const NumaPlan& plan) {
  const auto withCpus = std::count_if(t.nodes.begin(), t.nodes.end(),
                                      [](const NumaNodeInfo& n) { return !n.cpus.empty(); });
  const std::string cpus = "CPUs " + formatIndexList(plan.usableCpus);
  if (withCpus <= 1) return "nothing to bind: one NUMA node (" + cpus + "); workers run unbound";
  return "nothing to bind: every worker would get all of " + cpus +
         " and every NUMA node; workers run unbound";
}

// Keeps the memory nodes this process may allocate from.
void keepUsableMemory(NumaPlan& plan) {
  const IndexList mems = allowedMemoryNodes();
  for (auto& w : plan.workers) {
    if (w.cpus.empty() || w.memNodes.empty()) continue;
    if (mems.empty()) {  // e.g. a container whose seccomp profile refuses get_mempolicy
      w.note = "this process may not read or set memory policies: memory unbound";
      w.memNodes.clear();
      continue;
    }
    IndexList usable;
    std::set_intersection(w.memNodes.begin(), w.memNodes.end(), mems.begin(), mems.end(),
                          std::back_inserter(usable));
    if (usable == w.memNodes) continue;
    w.note = "memory node(s) " + formatIndexList(w.memNodes) + " not usable here";
    w.memNodes = usable;
  }
}

}  // namespace

std::optional<CpuBinding> NumaSetup::bindingFor(int localRank) const {
  if (localRank < 0 || localRank >= static_cast<int>(bindings.size())) return std::nullopt;
  return bindings[localRank];
}

NumaSetup setupNumaBinding(NumaPolicy policy, int workers, const EnvLookup& getenv) {
  NumaSetup s;
  s.policy = policy;
  if (policy == NumaPolicy::kNone) return s;
  TopologyReading reading = readTopology(getenv);
  s.topologySource = reading.source;
  s.thisSystem = reading.thisSystem;
  s.gpuSource = reading.gpuSource;
  const IndexList allowed = reading.thisSystem ? currentCpuAffinity() : IndexList{};
  s.plan = planNumaBinding(reading.topology, policy, workers, allowed);
  const std::string head = std::string("--numa-binding ") + numaPolicyName(policy) + ": ";
  s.lines.push_back(head + "topology of " + s.topologySource + ", GPUs: " + s.gpuSource +
                    (reading.topology.gpuNodes.empty() ? " (round-robin over NUMA nodes)" : ""));
  if (s.plan.nothingToBind) {
    s.outcome = "nothing to bind";
    s.lines.push_back(head + nothingToBindLine(reading.topology, s.plan));
  } else if (!s.thisSystem) {
    s.outcome = "not applied: another machine's topology";
    s.lines.push_back(head + s.topologySource + " does not describe this machine "
                      "(HWLOC_THISSYSTEM=1 says it does): the plan below is not applied");
  } else {
    s.outcome = "bound";
    keepUsableMemory(s.plan);
    for (const auto& w : s.plan.workers) {
      s.bindings.push_back(w.cpus.empty() ? std::nullopt
                                          : std::optional(makeCpuBinding(w.cpus, w.memNodes)));
    }
  }
  if (!s.plan.nothingToBind) {
    for (const auto& w : s.plan.workers) s.lines.push_back(head + describeWorker(w));
  }
  for (const auto& note : reading.notes) s.lines.push_back(head + note);
  return s;
}

}  // namespace ddp
