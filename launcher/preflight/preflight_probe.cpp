#include "launcher/preflight/preflight_probe.hpp"

#include <dlfcn.h>
#include <fcntl.h>
#include <netdb.h>
#include <poll.h>
#include <sys/socket.h>
#include <sys/statvfs.h>
#include <sys/utsname.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <filesystem>
#include <map>

#include "ddp_version.hpp"
#include "launcher/cli/cli_values.hpp"
#include "launcher/preflight/bounded_command.hpp"
#include "rendezvous/base/error.hpp"
#include "rendezvous/base/local_address.hpp"

namespace ddp {
namespace {

using Clock = std::chrono::steady_clock;

// Kept loaded for the process's lifetime, as nproc.cpp does (unloading CUDA can crash at exit).
void* openFirst(std::initializer_list<const char*> names) {
  for (const char* name : names) {
    if (void* handle = dlopen(name, RTLD_NOW | RTLD_LOCAL)) return handle;
  }
  return nullptr;
}

template <class Fn>
Fn symbol(void* lib, const char* name) {
  return lib ? reinterpret_cast<Fn>(dlsym(lib, name)) : nullptr;
}

// CUDA encodes versions as 1000 * major + 10 * minor.
std::string cudaVersion(int v) {
  return std::to_string(v / 1000) + "." + std::to_string((v % 1000) / 10);
}

// NCCL: 10000 * major + 100 * minor + patch since 2.9, 1000 * major + 100 * minor + patch before.
std::string ncclVersion(int v) {
  const int major = v >= 10000 ? v / 10000 : v / 1000;
  const int rest = v >= 10000 ? v % 10000 : v % 1000;
  return std::to_string(major) + "." + std::to_string(rest / 100) + "." + std::to_string(rest % 100);
}

// The driver's version and the distinct model names of its devices ("none" without a driver).
void probeDriver(NodeFingerprint& fp) {
  void* lib = openFirst({"libcuda.so.1", "libcuda.so"});
  auto init = symbol<int (*)(unsigned)>(lib, "cuInit");
  auto version = symbol<int (*)(int*)>(lib, "cuDriverGetVersion");
  auto count = symbol<int (*)(int*)>(lib, "cuDeviceGetCount");
  auto get = symbol<int (*)(int*, int)>(lib, "cuDeviceGet");
  auto name = symbol<int (*)(char*, int, int)>(lib, "cuDeviceGetName");
  if (!init || !version || !count || !get || !name) return;
  int v = 0;
  if (version(&v) == 0) fp.cudaDriver = cudaVersion(v);
  int n = 0;
  if (init(0) != 0 || count(&n) != 0) return;
  std::string models;
  for (int i = 0; i < n; ++i) {
    int device = 0;
    char buf[256] = "";
    if (get(&device, i) != 0 || name(buf, sizeof(buf) - 1, device) != 0) continue;
    if (models.find(buf) == std::string::npos) models += (models.empty() ? "" : " / ") + std::string(buf);
  }
  if (!models.empty()) fp.gpuModel = models;
}

void probeLibraries(NodeFingerprint& fp) {
  void* cudart = openFirst({"libcudart.so", "libcudart.so.13", "libcudart.so.12", "libcudart.so.11.0"});
  if (auto fn = symbol<int (*)(int*)>(cudart, "cudaRuntimeGetVersion")) {
    int v = 0;
    fp.cudaRuntime = fn(&v) == 0 ? cudaVersion(v) : "unknown";
  }
  void* nccl = openFirst({"libnccl.so.2", "libnccl.so"});
  if (auto fn = symbol<int (*)(int*)>(nccl, "ncclGetVersion")) {
    int v = 0;
    fp.nccl = fn(&v) == 0 ? ncclVersion(v) : "unknown";
  }
}

// Reads torch/version.py through the import system's finder, without importing torch.
constexpr const char* kTorchProbe = R"PY(import importlib.util, os, re, sys
spec = importlib.util.find_spec('torch')
if spec is None or not spec.submodule_search_locations:
    print('none'); sys.exit(0)
path = os.path.join(list(spec.submodule_search_locations)[0], 'version.py')
text = open(path).read()
v = re.search(r"^__version__\s*(?::[^=]*)?=\s*['\"]([^'\"]*)", text, re.M)
c = re.search(r"^cuda\s*(?::[^=]*)?=\s*['\"]([^'\"]*)", text, re.M)
print((v.group(1) if v else 'unknown') + (' (CUDA ' + c.group(1) + ')' if c else ''))
)PY";

std::string kernelRelease() {
  utsname u{};
  return ::uname(&u) == 0 ? u.release : "unknown";
}

std::string errorText(int err) {
  if (err == ECONNREFUSED) return "refused";
  if (err == EHOSTUNREACH || err == ENETUNREACH) return "no route";
  return std::strerror(err);
}

// Connects one resolved address; the error text, or "" when connected.
std::string connectOnce(const addrinfo& a, Clock::time_point deadline,
                        std::chrono::milliseconds timeout) {
  const int fd = ::socket(a.ai_family, a.ai_socktype | SOCK_NONBLOCK | SOCK_CLOEXEC, a.ai_protocol);
  if (fd < 0) return errorText(errno);
  std::string error;
  if (::connect(fd, a.ai_addr, a.ai_addrlen) != 0) {
    if (errno != EINPROGRESS) {
      error = errorText(errno);
    } else {
      pollfd p{fd, POLLOUT, 0};
      int rc = -1;
      do {
        const auto left = std::chrono::ceil<std::chrono::milliseconds>(deadline - Clock::now());
        rc = ::poll(&p, 1, static_cast<int>(std::max<int64_t>(left.count(), 0)));
      } while (rc < 0 && errno == EINTR);
      int soError = 0;
      socklen_t len = sizeof(soError);
      if (rc == 0) {
        error = "timed out after " + std::to_string(timeout.count()) + " ms";
      } else if (::getsockopt(fd, SOL_SOCKET, SO_ERROR, &soError, &len) != 0 || soError != 0) {
        error = errorText(soError != 0 ? soError : errno);
      }
    }
  }
  ::close(fd);
  return error;
}

}  // namespace

void applyTestFingerprint(const std::string& spec, NodeFingerprint& fp) {
  const std::map<std::string, std::string NodeFingerprint::*> fields = {
      {"ddprun", &NodeFingerprint::ddprun},       {"kernel", &NodeFingerprint::kernel},
      {"cuda_driver", &NodeFingerprint::cudaDriver}, {"cuda_runtime", &NodeFingerprint::cudaRuntime},
      {"nccl", &NodeFingerprint::nccl},           {"torch", &NodeFingerprint::torch},
      {"gpu_model", &NodeFingerprint::gpuModel}};
  size_t pos = 0;
  while (pos < spec.size()) {
    const size_t comma = std::min(spec.find(',', pos), spec.size());
    const std::string item = spec.substr(pos, comma - pos);
    pos = comma + 1;
    const size_t eq = item.find('=');
    const std::string key = item.substr(0, eq);
    if (eq == std::string::npos) throw ConfigError("DDP_TEST_FINGERPRINT: '" + item + "' is not field=value");
    const std::string value = item.substr(eq + 1);
    if (key == "gpus") {
      fp.gpus = detail::parseInt(value, 0, 1 << 16);
    } else if (auto it = fields.find(key); it != fields.end()) {
      fp.*(it->second) = value;
    } else {
      throw ConfigError("DDP_TEST_FINGERPRINT: unknown field '" + key + "'");
    }
  }
}

NodeFingerprint probeFingerprint(const EnvLookup& getenv) {
  NodeFingerprint fp;
  fp.ddprun = DDP_VERSION_STRING;
  fp.kernel = kernelRelease();
  fp.gpus = countGpus(getenv);
  probeDriver(fp);
  probeLibraries(fp);
  return fp;
}

std::string probeTorch(const std::string& python, std::chrono::milliseconds timeout) {
  const auto out = runBounded({python, "-c", kTorchProbe}, timeout);
  if (!out) return "unknown";
  std::string v = *out;
  while (!v.empty() && (v.back() == '\n' || v.back() == '\r')) v.pop_back();
  return v.empty() || v.find('\n') != std::string::npos ? "unknown" : v;
}

std::string pythonOf(const LaunchConfig& config) {
  const bool python = config.entrypointKind == EntrypointKind::kPythonScript ||
                      config.entrypointKind == EntrypointKind::kPythonModule;
  return python && !config.command.empty() ? config.command.front() : "";
}

std::string checkpointPlace(const LaunchConfig& config) {
  for (size_t i = 1; i < config.command.size(); ++i) {
    const std::string& arg = config.command[i];
    for (const char* flag : {"--checkpoint-dir", "--checkpoint_dir"}) {
      const std::string f(flag);
      if (arg == f && i + 1 < config.command.size()) return config.command[i + 1];
      if (arg.starts_with(f + "=")) return arg.substr(f.size() + 1);
    }
  }
  if (!config.logDir.empty()) return config.logDir;
  std::error_code ec;
  const auto cwd = std::filesystem::current_path(ec);
  return ec ? "." : cwd.string();
}

std::optional<uint64_t> freeDiskBytes(const std::string& path) {
  std::filesystem::path p = std::filesystem::absolute(path.empty() ? "." : path);
  std::error_code ec;
  while (!std::filesystem::exists(p, ec) && p.has_parent_path() && p != p.parent_path()) {
    p = p.parent_path();  // the folder may not exist yet: the file system it will be on counts
  }
  struct statvfs s {};
  if (::statvfs(p.c_str(), &s) != 0) return std::nullopt;
  return static_cast<uint64_t>(s.f_bavail) * s.f_frsize;
}

PortProbe probePort(const std::string& addr, uint16_t port, std::chrono::milliseconds timeout) {
  const bool v6 = addr.find(':') != std::string::npos;
  PortProbe probe{(v6 ? "[" + addr + "]" : addr) + ":" + std::to_string(port), false, ""};
  const auto started = Clock::now();
  const auto deadline = started + timeout;
  const AddressList list = resolveTcp(addr, port, probe.detail);
  if (!list) return probe;
  for (const addrinfo* a = list.get(); a != nullptr; a = a->ai_next) {
    probe.detail = connectOnce(*a, deadline, timeout);
    if (probe.detail.empty() || Clock::now() >= deadline) break;
  }
  probe.ok = probe.detail.empty();
  if (probe.ok) {
    const auto ms = std::chrono::duration_cast<std::chrono::milliseconds>(Clock::now() - started);
    probe.detail = std::to_string(ms.count()) + " ms";
  }
  return probe;
}

std::chrono::milliseconds testClockOffset(const EnvLookup& getenv) {
  const auto value = getenv("DDP_TEST_CLOCK_OFFSET_MS");
  if (!value || value->empty()) return std::chrono::milliseconds(0);
  try {
    size_t used = 0;
    const long long ms = std::stoll(*value, &used);
    if (used == value->size()) return std::chrono::milliseconds(ms);
  } catch (const std::exception&) {
  }
  throw ConfigError("DDP_TEST_CLOCK_OFFSET_MS '" + *value + "': expected an integer (ms)");
}

int64_t wallClockMs(std::chrono::milliseconds offset) {
  const auto now = std::chrono::system_clock::now().time_since_epoch();
  return std::chrono::duration_cast<std::chrono::milliseconds>(now).count() + offset.count();
}

}  // namespace ddp
