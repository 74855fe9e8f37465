#include "trainer/cuda_module.hpp"

#include <dlfcn.h>
#include <unistd.h>

#include <mutex>
#include <string>

#include "rendezvous/base/error.hpp"

namespace ddp {
namespace {

using MakeMlp = Model* (*)(const MlpShape*, int, bool);

// <dir of this executable>/../lib/<module>: the build tree, the GPU bundle and an install prefix
// all put bin/ and lib/ side by side. "" when /proc/self/exe cannot be read.
std::string besideExecutable() {
  char buf[4096];
  const ssize_t n = ::readlink("/proc/self/exe", buf, sizeof(buf) - 1);
  if (n <= 0) return "";
  std::string exe(buf, static_cast<std::size_t>(n));
  const auto slash = exe.rfind('/');
  if (slash == std::string::npos) return "";
  return exe.substr(0, slash) + "/../lib/" + kCudaModuleName;
}

// Loads the module once: beside the executable first, then by name (LD_LIBRARY_PATH, the cache).
MakeMlp loadModule() {
  static std::once_flag once;
  static MakeMlp make = nullptr;
  static std::string failure;
  std::call_once(once, [] {
    std::string why;
    void* handle = nullptr;
    for (const std::string& path : {besideExecutable(), std::string(kCudaModuleName)}) {
      if (path.empty()) continue;
      handle = ::dlopen(path.c_str(), RTLD_NOW | RTLD_LOCAL);
      if (handle) break;
      if (why.empty()) why = ::dlerror();
    }
    if (!handle) {
      failure = "model: cannot load the CUDA model (" + std::string(kCudaModuleName) +
                "): " + why;
      return;
    }
    make = reinterpret_cast<MakeMlp>(::dlsym(handle, kCudaModuleEntry));
    if (!make) {
      failure = "model: " + std::string(kCudaModuleName) + " has no " + kCudaModuleEntry;
    }
  });
  if (!make) throw Error(failure);
  return make;
}

}  // namespace

std::unique_ptr<Model> makeCudaMlp(const MlpShape& shape, int deviceIndex, bool bf16) {
  return std::unique_ptr<Model>(loadModule()(&shape, deviceIndex, bf16));
}

}  // namespace ddp
