#include "launcher/numa/nproc.hpp"

#include <dlfcn.h>
#include <sched.h>

#include <algorithm>
#include <cstdlib>
#include <filesystem>
#include <set>
#include <thread>
#include <vector>

#include "rendezvous/base/error.hpp"

namespace ddp {
namespace {

constexpr int kCudaSuccess = 0;
constexpr int kCudaErrorNoDevice = 100;  // same value in the driver and runtime APIs

// Loads the first library of `names` that dlopen finds. The handle is kept for the process's
// lifetime on purpose: unloading the CUDA driver can crash at exit.
void* openFirst(std::initializer_list<const char*> names) {
  for (const char* name : names)
    if (void* handle = dlopen(name, RTLD_NOW | RTLD_LOCAL)) return handle;
  return nullptr;
}

// The driver API: cuInit + cuDeviceGetCount. nullopt when the driver is missing or broken.
std::optional<int> countWithDriver() {
  void* lib = openFirst({"libcuda.so.1", "libcuda.so"});
  if (!lib) return std::nullopt;
  using InitFn = int (*)(unsigned);
  using CountFn = int (*)(int*);
  auto init = reinterpret_cast<InitFn>(dlsym(lib, "cuInit"));
  auto count = reinterpret_cast<CountFn>(dlsym(lib, "cuDeviceGetCount"));
  if (!init || !count) return std::nullopt;
  int rc = init(0);
  if (rc == kCudaErrorNoDevice) return 0;
  int n = 0;
  if (rc != kCudaSuccess || count(&n) != kCudaSuccess) return std::nullopt;
  return n;
}

// The runtime API: cudaGetDeviceCount. nullopt when cudart is missing or finds no driver.
std::optional<int> countWithRuntime() {
  void* lib = openFirst({"libcudart.so", "libcudart.so.13", "libcudart.so.12", "libcudart.so.11.0"});
  if (!lib) return std::nullopt;
  using CountFn = int (*)(int*);
  auto count = reinterpret_cast<CountFn>(dlsym(lib, "cudaGetDeviceCount"));
  if (!count) return std::nullopt;
  int n = 0;
  int rc = count(&n);
  if (rc == kCudaErrorNoDevice) return 0;
  if (rc != kCudaSuccess) return std::nullopt;
  return n;
}

bool isUuidEntry(const std::string& entry) {
  return entry.starts_with("GPU-") || entry.starts_with("MIG-");
}

}  // namespace

std::vector<std::string> visibleDeviceEntries(const std::string& cudaVisibleDevices, int physical) {
  std::set<std::string> seen;
  std::vector<std::string> entries;
  std::string::size_type start = 0;
  while (start <= cudaVisibleDevices.size() && static_cast<int>(entries.size()) < physical) {
    auto comma = cudaVisibleDevices.find(',', start);
    auto end = comma == std::string::npos ? cudaVisibleDevices.size() : comma;
    std::string entry = cudaVisibleDevices.substr(start, end - start);
    entry.erase(0, entry.find_first_not_of(" \t"));
    entry.erase(entry.find_last_not_of(" \t") + 1);
    bool valid = false;
    if (isUuidEntry(entry)) {
      valid = true;
    } else if (!entry.empty() && entry.find_first_not_of("0123456789") == std::string::npos &&
               entry.size() < 6) {
      valid = std::stoi(entry) < physical;
    }
    // CUDA stops at the first invalid or repeated entry ("-1" is the usual way to hide all).
    if (!valid || !seen.insert(entry).second) break;
    entries.push_back(entry);
    if (comma == std::string::npos) break;
    start = comma + 1;
  }
  return entries;
}

int countVisibleDevices(const std::string& cudaVisibleDevices, int physical) {
  return static_cast<int>(visibleDeviceEntries(cudaVisibleDevices, physical).size());
}

int countNvidiaDeviceFiles(const std::string& devDir) {
  std::error_code ec;
  int count = 0;
  for (const auto& entry : std::filesystem::directory_iterator(devDir, ec)) {
    auto name = entry.path().filename().string();
    if (name.size() > 6 && name.starts_with("nvidia") &&
        name.find_first_not_of("0123456789", 6) == std::string::npos)
      ++count;
  }
  return count;
}

int countGpus(const EnvLookup& getenv) {
  if (auto n = countWithDriver()) return *n;
  if (auto n = countWithRuntime()) return *n;
  int physical = countNvidiaDeviceFiles("/dev");
  auto visible = getenv("CUDA_VISIBLE_DEVICES");
  return visible ? countVisibleDevices(*visible, physical) : physical;
}

int countCpus() {
  cpu_set_t set;
  CPU_ZERO(&set);
  if (sched_getaffinity(0, sizeof(set), &set) == 0 && CPU_COUNT(&set) > 0) return CPU_COUNT(&set);
  return std::max(1u, std::thread::hardware_concurrency());
}

}  // namespace ddp
