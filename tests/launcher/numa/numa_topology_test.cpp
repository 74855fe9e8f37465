// --numa-binding reading machines through hwloc (numa_topology.hpp, numa_setup.hpp): the XML
// topologies in tests/launcher/data (GPUs as hwloc CUDA OS devices and as bare NVIDIA PCI devices),
// HWLOC_SYNTHETIC, CUDA_VISIBLE_DEVICES, and what setupNumaBinding decides to apply.
#include <catch2/catch.hpp>

#include <cstdlib>
#include <map>
#include <optional>
#include <string>

#include "launcher/numa/numa_setup.hpp"
#include "launcher/numa/numa_topology.hpp"
#include "rendezvous/base/error.hpp"

namespace {

std::string dataFile(const std::string& name) {
  const char* root = std::getenv("DDP_SOURCE_DIR");
  return std::string(root ? root : ".") + "/tests/launcher/data/" + name;
}

ddp::EnvLookup envOf(std::map<std::string, std::string> vars) {
  return [vars](const std::string& name) -> std::optional<std::string> {
    auto it = vars.find(name);
    return it == vars.end() ? std::nullopt : std::optional(it->second);
  };
}

std::vector<std::optional<unsigned>> nodes(std::initializer_list<unsigned> list) {
  return {list.begin(), list.end()};
}

}  // namespace

TEST_CASE("an XML topology: sockets, NUMA nodes, cores, L3 domains and CUDA devices", "[numa]") {
  const auto r = ddp::readTopology(envOf({{"HWLOC_XMLFILE", dataFile("numa_2s4n8g.xml")}}));
  CHECK_FALSE(r.thisSystem);
  CHECK(r.gpuSource == "hwloc's CUDA OS devices");
  REQUIRE(r.topology.nodes.size() == 4);
  CHECK(r.topology.nodes[2].id == 2);
  CHECK(r.topology.nodes[2].package == 1);
  CHECK(ddp::formatIndexList(r.topology.nodes[2].cpus) == "8-11,24-27");
  REQUIRE(r.topology.cores.size() == 16);
  CHECK(ddp::formatIndexList(r.topology.cores[5]) == "5,21");
  CHECK(r.topology.coreComplexes.size() == 8);
  CHECK(r.topology.gpuNodes == nodes({0, 0, 1, 1, 2, 2, 3, 3}));
}

TEST_CASE("CUDA_VISIBLE_DEVICES picks and orders the topology's GPUs", "[numa]") {
  auto r = ddp::readTopology(envOf({{"HWLOC_XMLFILE", dataFile("numa_2s4n8g.xml")},
                                    {"CUDA_VISIBLE_DEVICES", "6,1,3"}}));
  CHECK(r.topology.gpuNodes == nodes({3, 0, 1}));
  r = ddp::readTopology(envOf({{"HWLOC_XMLFILE", dataFile("numa_2s4n8g.xml")},
                               {"CUDA_VISIBLE_DEVICES", "GPU-0a1b2c3d,2"}}));
  REQUIRE(r.topology.gpuNodes.size() == 2);
  CHECK_FALSE(r.topology.gpuNodes[0].has_value());  // a UUID cannot be placed without the driver
  CHECK(r.topology.gpuNodes[1] == 1u);
}

TEST_CASE("GPUs as bare NVIDIA PCI devices are taken in bus order", "[numa]") {
  // numa_2n_here.xml: the GPU on the lower bus (GPU 0) hangs below socket 1 / node 1.
  const auto r = ddp::readTopology(envOf({{"HWLOC_XMLFILE", dataFile("numa_2n_here.xml")}}));
  CHECK(r.gpuSource == "NVIDIA PCI devices in bus order");
  CHECK(r.topology.gpuNodes == nodes({1, 0}));
}

TEST_CASE("HWLOC_SYNTHETIC topologies; bad topology sources are one clear error", "[numa]") {
  const auto r = ddp::readTopology(envOf({{"HWLOC_SYNTHETIC", "pack:2 [numa] l3:2 core:2 pu:2"}}));
  CHECK(r.source == "HWLOC_SYNTHETIC=pack:2 [numa] l3:2 core:2 pu:2");
  CHECK(r.topology.nodes.size() == 2);
  CHECK(r.topology.cores.size() == 8);
  CHECK(r.topology.coreComplexes.size() == 4);
  CHECK(r.topology.gpuNodes.empty());
  CHECK_THROWS_AS(ddp::readTopology(envOf({{"HWLOC_SYNTHETIC", "pack:x"}})), ddp::ConfigError);
  CHECK_THROWS_AS(ddp::readTopology(envOf({{"HWLOC_XMLFILE", dataFile("missing.xml")}})),
                  ddp::ConfigError);
}

TEST_CASE("another machine's topology is planned and shown, never applied", "[numa]") {
  const auto s = ddp::setupNumaBinding(ddp::NumaPolicy::kExclusive, 8,
                                       envOf({{"HWLOC_XMLFILE", dataFile("numa_2s4n8g.xml")}}));
  CHECK(s.outcome == "not applied: another machine's topology");
  CHECK(s.bindings.empty());
  CHECK_FALSE(s.bindingFor(0).has_value());
  CHECK(ddp::formatIndexList(s.plan.workers[7].cpus) == "14-15,30-31");
  REQUIRE(s.lines.size() == 10);  // header, "not applied", one per worker
  CHECK(s.lines[1].find("not applied") != std::string::npos);
}

TEST_CASE("one NUMA node: a single 'nothing to bind' line and no binding", "[numa]") {
  const auto s = ddp::setupNumaBinding(ddp::NumaPolicy::kNode, 2,
                                       envOf({{"HWLOC_SYNTHETIC", "pack:1 [numa] core:4 pu:1"}}));
  CHECK(s.outcome == "nothing to bind");
  CHECK(s.bindings.empty());
  REQUIRE(s.lines.size() == 2);
  CHECK(s.lines[1] == "--numa-binding node: nothing to bind: one NUMA node (CPUs 0-3); workers "
                      "run unbound");
}

TEST_CASE("no --numa-binding reads nothing", "[numa]") {
  const auto s = ddp::setupNumaBinding(ddp::NumaPolicy::kNone, 2,
                                       envOf({{"HWLOC_XMLFILE", dataFile("missing.xml")}}));
  CHECK(s.lines.empty());
  CHECK_FALSE(s.bindingFor(0).has_value());
}
