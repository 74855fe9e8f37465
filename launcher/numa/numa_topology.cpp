#include "launcher/numa/numa_topology.hpp"

#include <dlfcn.h>
#include <hwloc.h>

#include <algorithm>
#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <map>
#include <optional>
#include <tuple>

#include "rendezvous/base/error.hpp"

namespace ddp {
namespace {

constexpr unsigned kNvidiaVendor = 0x10de;
constexpr unsigned kDisplayClass = 0x03;  // PCI base class of VGA (0x0300) and 3D (0x0302)

// Owns one hwloc topology.
class Hwloc {
 public:
  Hwloc() {
    if (hwloc_topology_init(&topology_) != 0) {
      throw ConfigError(std::string("--numa-binding: hwloc cannot start: ") + std::strerror(errno));
    }
  }
  ~Hwloc() { hwloc_topology_destroy(topology_); }
  Hwloc(const Hwloc&) = delete;
  Hwloc& operator=(const Hwloc&) = delete;
  hwloc_topology_t get() const { return topology_; }

 private:
  hwloc_topology_t topology_ = nullptr;
};

IndexList indicesOf(hwloc_const_bitmap_t set) {
  IndexList out;
  if (set == nullptr || hwloc_bitmap_weight(set) < 0) return out;  // infinite: none
  for (int i = hwloc_bitmap_first(set); i >= 0; i = hwloc_bitmap_next(set, i))
    out.push_back(static_cast<unsigned>(i));
  return out;
}

std::optional<std::string> nonEmpty(const EnvLookup& getenv, const char* name) {
  auto value = getenv(name);
  return value && !value->empty() ? value : std::nullopt;
}

// Points hwloc at HWLOC_XMLFILE or HWLOC_SYNTHETIC when set; returns the source's name.
std::string chooseSource(hwloc_topology_t t, const EnvLookup& getenv) {
  if (auto xml = nonEmpty(getenv, "HWLOC_XMLFILE")) {
    if (hwloc_topology_set_xml(t, xml->c_str()) != 0) {
      throw ConfigError("HWLOC_XMLFILE=" + *xml + ": cannot read it: " + std::strerror(errno));
    }
    return "HWLOC_XMLFILE=" + *xml;
  }
  if (auto synthetic = nonEmpty(getenv, "HWLOC_SYNTHETIC")) {
    if (hwloc_topology_set_synthetic(t, synthetic->c_str()) != 0) {
      throw ConfigError("HWLOC_SYNTHETIC='" + *synthetic + "': not a topology hwloc understands");
    }
    return "HWLOC_SYNTHETIC=" + *synthetic;
  }
  return "this machine";
}

void readNodes(hwloc_topology_t t, CpuTopology& out) {
  for (hwloc_obj_t n = nullptr; (n = hwloc_get_next_obj_by_type(t, HWLOC_OBJ_NUMANODE, n));) {
    NumaNodeInfo node;
    node.id = n->os_index;
    node.cpus = indicesOf(n->cpuset);
    if (hwloc_obj_t pkg = hwloc_get_ancestor_obj_by_type(t, HWLOC_OBJ_PACKAGE, n)) {
      node.package = pkg->os_index;
    }
    out.nodes.push_back(std::move(node));
  }
  std::sort(out.nodes.begin(), out.nodes.end(),
            [](const auto& a, const auto& b) { return a.id < b.id; });
}

std::vector<IndexList> setsOf(hwloc_topology_t t, hwloc_obj_type_t type) {
  std::vector<IndexList> out;
  for (hwloc_obj_t o = nullptr; (o = hwloc_get_next_obj_by_type(t, type, o));) {
    out.push_back(indicesOf(o->cpuset));
  }
  return out;
}

// The CPU sets of the deepest level of data or unified caches (L3 on most machines).
std::vector<IndexList> lastLevelCaches(hwloc_topology_t t) {
  for (auto type : {HWLOC_OBJ_L5CACHE, HWLOC_OBJ_L4CACHE, HWLOC_OBJ_L3CACHE, HWLOC_OBJ_L2CACHE,
                    HWLOC_OBJ_L1CACHE}) {
    auto sets = setsOf(t, type);
    if (!sets.empty()) return sets;
  }
  return {};
}

// The NUMA node a GPU's I/O object is local to.
std::optional<unsigned> nodeOf(hwloc_topology_t t, hwloc_obj_t io, int gpu,
                               std::vector<std::string>& notes) {
  hwloc_obj_t cpuSide = io == nullptr ? nullptr : hwloc_get_non_io_ancestor_obj(t, io);
  const IndexList nodes = cpuSide == nullptr ? IndexList{} : indicesOf(cpuSide->nodeset);
  if (nodes.empty()) return std::nullopt;
  if (nodes.size() > 1) {
    notes.push_back("GPU " + std::to_string(gpu) + " is local to NUMA nodes " +
                    formatIndexList(nodes) + "; it counts as on node " +
                    std::to_string(nodes.front()));
  }
  return nodes.front();
}

// The PCI bus ids of the GPUs the CUDA driver shows this process, in CUDA's order; nullopt when
// there is no driver or it reports no device.
std::optional<std::vector<std::string>> cudaBusIds() {
  void* lib = dlopen("libcuda.so.1", RTLD_NOW | RTLD_LOCAL);  // kept open: see nproc.cpp
  if (lib == nullptr) return std::nullopt;
  using InitFn = int (*)(unsigned);
  using CountFn = int (*)(int*);
  using GetFn = int (*)(int*, int);
  using BusIdFn = int (*)(char*, int, int);
  auto init = reinterpret_cast<InitFn>(dlsym(lib, "cuInit"));
  auto count = reinterpret_cast<CountFn>(dlsym(lib, "cuDeviceGetCount"));
  auto get = reinterpret_cast<GetFn>(dlsym(lib, "cuDeviceGet"));
  auto busId = reinterpret_cast<BusIdFn>(dlsym(lib, "cuDeviceGetPCIBusId"));
  int n = 0;
  if (!init || !count || !get || !busId || init(0) != 0 || count(&n) != 0 || n <= 0) {
    return std::nullopt;
  }
  std::vector<std::string> ids;
  for (int i = 0; i < n; ++i) {
    int device = 0;
    char id[64] = {0};
    if (get(&device, i) != 0 || busId(id, sizeof(id) - 1, device) != 0) return std::nullopt;
    ids.emplace_back(id);
  }
  return ids;
}

// Physical GPUs from hwloc itself: CUDA OS devices by number, else NVIDIA PCI devices by bus id.
std::vector<hwloc_obj_t> topologyGpus(hwloc_topology_t t, std::string& source) {
  std::map<int, hwloc_obj_t> cuda;
  for (hwloc_obj_t o = nullptr; (o = hwloc_get_next_osdev(t, o));) {
    const char* name = o->name == nullptr ? "" : o->name;
    if (std::strncmp(name, "cuda", 4) == 0 && name[4] != '\0' &&
        std::strspn(name + 4, "0123456789") == std::strlen(name + 4)) {
      cuda.emplace(std::atoi(name + 4), o);
    }
  }
  std::vector<hwloc_obj_t> gpus;
  for (auto& [number, obj] : cuda) gpus.push_back(obj);
  if (!gpus.empty()) {
    source = "hwloc's CUDA OS devices";
    return gpus;
  }
  for (hwloc_obj_t o = nullptr; (o = hwloc_get_next_pcidev(t, o));) {
    const auto& pci = o->attr->pcidev;
    if (pci.vendor_id == kNvidiaVendor && (pci.class_id >> 8) == kDisplayClass) gpus.push_back(o);
  }
  auto busOrder = [](hwloc_obj_t o) {
    const auto& p = o->attr->pcidev;
    return std::make_tuple(p.domain, p.bus, p.dev, p.func);
  };
  std::sort(gpus.begin(), gpus.end(),
            [&](hwloc_obj_t a, hwloc_obj_t b) { return busOrder(a) < busOrder(b); });
  if (!gpus.empty()) source = "NVIDIA PCI devices in bus order";
  return gpus;
}

// GPU i's NUMA node for the GPUs hwloc found, CUDA_VISIBLE_DEVICES applied.
void placeTopologyGpus(hwloc_topology_t t, const EnvLookup& getenv, TopologyReading& r) {
  std::vector<hwloc_obj_t> physical = topologyGpus(t, r.gpuSource);
  std::vector<std::optional<hwloc_obj_t>> visible(physical.begin(), physical.end());
  if (auto cvd = getenv("CUDA_VISIBLE_DEVICES"); cvd && !physical.empty()) {
    visible.clear();
    for (const auto& entry : visibleDeviceEntries(*cvd, static_cast<int>(physical.size()))) {
      const bool index = entry.find_first_not_of("0123456789") == std::string::npos;
      visible.push_back(index ? std::optional(physical[std::stoul(entry)]) : std::nullopt);
      if (!index) {
        r.notes.push_back("CUDA_VISIBLE_DEVICES names " + entry + " by UUID: without the CUDA "
                          "driver its NUMA node is unknown");
      }
    }
    r.gpuSource += ", CUDA_VISIBLE_DEVICES=" + *cvd;
  }
  for (std::size_t i = 0; i < visible.size(); ++i) {
    r.topology.gpuNodes.push_back(
        visible[i] ? nodeOf(t, *visible[i], static_cast<int>(i), r.notes) : std::nullopt);
  }
}

// GPU i's NUMA node through the CUDA driver. False when the driver is absent or one of its GPUs
// is not in the topology (then hwloc's own devices are used).
bool placeDriverGpus(hwloc_topology_t t, TopologyReading& r) {
  auto ids = cudaBusIds();
  if (!ids) return false;
  std::vector<hwloc_obj_t> devices;
  for (const auto& id : *ids) {
    hwloc_obj_t pci = hwloc_get_pcidev_by_busidstring(t, id.c_str());
    if (pci == nullptr) {
      r.notes.push_back("the CUDA driver's GPU " + id + " is not among hwloc's PCI devices");
      return false;
    }
    devices.push_back(pci);
  }
  for (std::size_t i = 0; i < devices.size(); ++i) {
    r.topology.gpuNodes.push_back(nodeOf(t, devices[i], static_cast<int>(i), r.notes));
  }
  r.gpuSource = "the CUDA driver";
  return true;
}

}  // namespace

TopologyReading readTopology(const EnvLookup& getenv) {
  Hwloc hwloc;
  hwloc_topology_t t = hwloc.get();
  // GPUs are PCI devices: keep the important I/O objects (hwloc drops them all by default).
  hwloc_topology_set_io_types_filter(t, HWLOC_TYPE_FILTER_KEEP_IMPORTANT);
  TopologyReading r;
  r.source = chooseSource(t, getenv);
  if (hwloc_topology_load(t) != 0) {
    const std::string why = std::strerror(errno);
    if (r.source != "this machine") throw ConfigError(r.source + ": hwloc cannot load it: " + why);
    throw ConfigError("--numa-binding: hwloc cannot read this machine's topology: " + why);
  }
  r.thisSystem = hwloc_topology_is_thissystem(t) != 0;
  readNodes(t, r.topology);
  r.topology.cores = setsOf(t, HWLOC_OBJ_CORE);
  r.topology.coreComplexes = lastLevelCaches(t);
  r.gpuSource = "no GPU";
  if (!(r.thisSystem && placeDriverGpus(t, r))) placeTopologyGpus(t, getenv, r);
  return r;
}

}  // namespace ddp
