// --numa-binding's pure plan (numa_binding.hpp): topology -> each local rank's CPUs and memory
// nodes, for every policy, on a hand-built 2 sockets x 2 NUMA nodes x 8 GPUs machine (the same one
// as tests/launcher/data/numa_2s4n8g.xml), and the kernel masks built from a plan.
#include <catch2/catch.hpp>

#include <algorithm>
#include <string>
#include <vector>

#include "launcher/numa/cpu_binding.hpp"
#include "launcher/numa/numa_binding.hpp"
#include "rendezvous/base/error.hpp"

using ddp::CpuTopology;
using ddp::IndexList;
using ddp::NumaPlan;
using ddp::NumaPolicy;

namespace {

IndexList range(unsigned first, unsigned last) {
  IndexList out;
  for (unsigned i = first; i <= last; ++i) out.push_back(i);
  return out;
}

IndexList join(IndexList a, const IndexList& b) {
  a.insert(a.end(), b.begin(), b.end());
  std::sort(a.begin(), a.end());
  return a;
}

// 2 sockets x 2 NUMA nodes; node n: cores 4n..4n+3, core c = CPUs {c, c+16}; two L3 domains of two
// cores per node; GPU g on node g / 2.
CpuTopology bigMachine() {
  CpuTopology t;
  for (unsigned n = 0; n < 4; ++n) {
    t.nodes.push_back({n, n / 2, join(range(4 * n, 4 * n + 3), range(4 * n + 16, 4 * n + 19))});
    for (unsigned l3 = 0; l3 < 2; ++l3) {
      const unsigned c = 4 * n + 2 * l3;
      t.coreComplexes.push_back(join(range(c, c + 1), range(c + 16, c + 17)));
    }
  }
  for (unsigned c = 0; c < 16; ++c) t.cores.push_back({c, c + 16});
  for (unsigned g = 0; g < 8; ++g) t.gpuNodes.push_back(g / 2);
  return t;
}

std::vector<std::string> cpusOf(const NumaPlan& plan) {
  std::vector<std::string> out;
  for (const auto& w : plan.workers) out.push_back(ddp::formatIndexList(w.cpus));
  return out;
}

std::vector<std::string> memOf(const NumaPlan& plan) {
  std::vector<std::string> out;
  for (const auto& w : plan.workers) out.push_back(ddp::formatIndexList(w.memNodes));
  return out;
}

using Strings = std::vector<std::string>;

}  // namespace

TEST_CASE("node: every CPU of the GPU's NUMA node, memory on that node", "[numa]") {
  const NumaPlan plan = ddp::planNumaBinding(bigMachine(), NumaPolicy::kNode, 8, {});
  CHECK(cpusOf(plan) == Strings{"0-3,16-19", "0-3,16-19", "4-7,20-23", "4-7,20-23", "8-11,24-27",
                                "8-11,24-27", "12-15,28-31", "12-15,28-31"});
  CHECK(memOf(plan) == Strings{"0", "0", "1", "1", "2", "2", "3", "3"});
  CHECK(plan.workers[5].gpu == 5);
  CHECK(plan.workers[5].node == 2u);
  CHECK_FALSE(plan.nothingToBind);
}

TEST_CASE("socket: every CPU of the GPU's socket, memory on the socket's nodes", "[numa]") {
  const NumaPlan plan = ddp::planNumaBinding(bigMachine(), NumaPolicy::kSocket, 8, {});
  const std::string first = "0-7,16-23", second = "8-15,24-31";
  CHECK(cpusOf(plan) == Strings{first, first, first, first, second, second, second, second});
  CHECK(memOf(plan) == Strings{"0-1", "0-1", "0-1", "0-1", "2-3", "2-3", "2-3", "2-3"});
}

TEST_CASE("exclusive: the node's cores split between its workers, hyperthreads together",
          "[numa]") {
  const NumaPlan plan = ddp::planNumaBinding(bigMachine(), NumaPolicy::kExclusive, 8, {});
  CHECK(cpusOf(plan) == Strings{"0-1,16-17", "2-3,18-19", "4-5,20-21", "6-7,22-23", "8-9,24-25",
                                "10-11,26-27", "12-13,28-29", "14-15,30-31"});
  CHECK(memOf(plan) == Strings{"0", "0", "1", "1", "2", "2", "3", "3"});

  SECTION("one worker on a node gets all of its cores") {
    CHECK(cpusOf(ddp::planNumaBinding(bigMachine(), NumaPolicy::kExclusive, 1, {})) ==
          Strings{"0-3,16-19"});
  }
  SECTION("cores that do not divide: the lowest ranks get one more") {
    CpuTopology t = bigMachine();
    t.gpuNodes.assign(3, 0u);  // three GPUs on node 0: 4 cores for 3 workers
    CHECK(cpusOf(ddp::planNumaBinding(t, NumaPolicy::kExclusive, 3, {})) ==
          Strings{"0-1,16-17", "2,18", "3,19"});
  }
  SECTION("fewer cores than workers on a node is a configuration error") {
    CpuTopology t = bigMachine();
    t.gpuNodes.assign(5, 0u);
    CHECK_THROWS_AS(ddp::planNumaBinding(t, NumaPolicy::kExclusive, 5, {}), ddp::ConfigError);
  }
}

TEST_CASE("core-complex: one L3 domain of the node per worker", "[numa]") {
  CHECK(cpusOf(ddp::planNumaBinding(bigMachine(), NumaPolicy::kCoreComplex, 1, {})) ==
        Strings{"0-1,16-17"});  // exclusive gives this worker the whole node
  CpuTopology t = bigMachine();
  t.gpuNodes.assign(3, 3u);  // three workers on node 3's two domains: the third reuses the first
  const NumaPlan plan = ddp::planNumaBinding(t, NumaPolicy::kCoreComplex, 3, {});
  CHECK(cpusOf(plan) == Strings{"12-13,28-29", "14-15,30-31", "12-13,28-29"});
  CHECK(memOf(plan) == Strings{"3", "3", "3"});
}

TEST_CASE("more workers than GPUs wrap around the GPUs; no GPU: NUMA nodes round-robin",
          "[numa]") {
  CpuTopology t = bigMachine();
  t.gpuNodes = {3u, 1u};
  NumaPlan plan = ddp::planNumaBinding(t, NumaPolicy::kNode, 3, {});
  CHECK(cpusOf(plan) == Strings{"12-15,28-31", "4-7,20-23", "12-15,28-31"});
  CHECK(plan.workers[2].gpu == 0);

  t.gpuNodes.clear();
  plan = ddp::planNumaBinding(t, NumaPolicy::kNode, 5, {});
  CHECK(memOf(plan) == Strings{"0", "1", "2", "3", "0"});
  CHECK_FALSE(plan.workers[0].gpu.has_value());
}

TEST_CASE("only the agent's own CPUs are used", "[numa]") {
  CpuTopology t = bigMachine();
  t.gpuNodes.clear();
  // An agent limited to CPUs 2-9: node 3 has none of them, so round-robin skips it; node 0 keeps
  // cores 2 and 3 only.
  const NumaPlan plan = ddp::planNumaBinding(t, NumaPolicy::kNode, 4, range(2, 9));
  CHECK(ddp::formatIndexList(plan.usableCpus) == "2-9");
  CHECK(cpusOf(plan) == Strings{"2-3", "4-7", "8-9", "2-3"});
  CHECK(memOf(plan) == Strings{"0", "1", "2", "0"});
}

TEST_CASE("a GPU whose NUMA node is unknown leaves its worker unbound, with a note", "[numa]") {
  CpuTopology t = bigMachine();
  t.gpuNodes = {std::nullopt, 2u};
  const NumaPlan plan = ddp::planNumaBinding(t, NumaPolicy::kNode, 2, {});
  CHECK(plan.workers[0].cpus.empty());
  CHECK(plan.workers[0].note.find("GPU 0") != std::string::npos);
  CHECK(ddp::formatIndexList(plan.workers[1].cpus) == "8-11,24-27");
}

TEST_CASE("nothing to bind: one NUMA node, or a policy that spans every node", "[numa]") {
  CpuTopology one;
  one.nodes.push_back({0, 0, range(0, 3)});
  for (unsigned c = 0; c < 4; ++c) one.cores.push_back({c});
  CHECK(ddp::planNumaBinding(one, NumaPolicy::kNode, 2, {}).nothingToBind);
  CHECK(ddp::planNumaBinding(one, NumaPolicy::kSocket, 2, {}).nothingToBind);
  // exclusive still splits the one node's cores
  const NumaPlan split = ddp::planNumaBinding(one, NumaPolicy::kExclusive, 2, {});
  CHECK_FALSE(split.nothingToBind);
  CHECK(cpusOf(split) == Strings{"0-1", "2-3"});

  CpuTopology twoNodesOneSocket;
  twoNodesOneSocket.nodes = {{0, 0, range(0, 1)}, {1, 0, range(2, 3)}};
  CHECK(ddp::planNumaBinding(twoNodesOneSocket, NumaPolicy::kSocket, 2, {}).nothingToBind);
  CHECK_FALSE(ddp::planNumaBinding(twoNodesOneSocket, NumaPolicy::kNode, 2, {}).nothingToBind);
}

TEST_CASE("policy names, index lists and kernel masks", "[numa]") {
  CHECK(ddp::parseNumaPolicy("core-complex") == NumaPolicy::kCoreComplex);
  CHECK(std::string(ddp::numaPolicyName(NumaPolicy::kExclusive)) == "exclusive");
  CHECK_THROWS_AS(ddp::parseNumaPolicy("numa"), ddp::ConfigError);
  CHECK(ddp::formatIndexList({}) == "");
  CHECK(ddp::formatIndexList({0, 1, 2, 5, 7, 8}) == "0-2,5,7-8");

  const ddp::CpuBinding b = ddp::makeCpuBinding({1, 64, 65}, {2, 3});
  REQUIRE(b.cpuMask.size() == 2);
  CHECK(b.cpuMask[0] == 0b10UL);
  CHECK(b.cpuMask[1] == 0b11UL);
  CHECK(b.nodeMask == std::vector<unsigned long>{0b1100UL});
  CHECK(b.firstNodeMask == std::vector<unsigned long>{0b100UL});
  CHECK(ddp::makeCpuBinding({}, {}).cpuMask.empty());
}
