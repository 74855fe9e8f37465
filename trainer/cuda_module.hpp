// The CUDA model as a module loaded on demand.
//
// cuBLAS registers its kernels when it is loaded: a process that merely links it spends about
// 0.4 s of CPU and 215 MB of memory before main() (docs/trainer.md has the measurement). That cost is
// paid by every worker of a CPU job, and by every replacement process an in-place recovery starts
// (docs/recovery.md). So CudaMlp (cuda_mlp.hpp, cuBLAS plus the kernels) is built into a module of
// its own, libddp_train_cuda.so in the build's (or bundle's, or install prefix's) lib/ beside
// bin/, which `train` loads only when it makes a model on a CUDA device. The device count
// (cuda_devices.hpp) needs only the CUDA runtime, cheap to load, which train links.
//
// Thread safety: makeCudaMlp() loads the module once (thread-safe) and makes a model per call.
#pragma once

#include <memory>

#include "trainer/model.hpp"

namespace ddp {

// CudaMlp(shape, deviceIndex, bf16) from the module. Throws ddp::Error with a one-line reason when
// the module cannot be loaded (not found, or cuBLAS missing), and what CudaMlp's constructor
// throws (ConfigError when no device is visible).
std::unique_ptr<Model> makeCudaMlp(const MlpShape& shape, int deviceIndex, bool bf16);

// The module's file name, and the symbol it exports (extern "C", defined in cuda_mlp.cu):
//   ddp::Model* ddp_train_cuda_make_mlp(const ddp::MlpShape* shape, int deviceIndex, bool bf16);
// returning a new CudaMlp the caller owns; throws what CudaMlp's constructor throws.
inline constexpr const char* kCudaModuleName = "libddp_train_cuda.so";
inline constexpr const char* kCudaModuleEntry = "ddp_train_cuda_make_mlp";

}  // namespace ddp
