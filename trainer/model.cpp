#include "trainer/model.hpp"

#include "rendezvous/base/error.hpp"
#include "trainer/cpu_mlp.hpp"
#ifdef DDP_TRAINER_CUDA
#include "trainer/cuda_devices.hpp"
#include "trainer/cuda_module.hpp"
#endif

namespace ddp {

bool cudaDevicesPresent() {
#ifdef DDP_TRAINER_CUDA
  return cudaDeviceCount() > 0;
#else
  return false;
#endif
}

std::unique_ptr<Model> makeModel(TrainDevice device, const MlpShape& shape, int deviceIndex,
                                 bool bf16) {
  if (device == TrainDevice::kCpu) {
    if (bf16) throw ConfigError("model: bf16 autocast needs device \"cuda\"");
    return std::make_unique<CpuMlp>(shape);
  }
  if (device == TrainDevice::kCuda) {
#ifdef DDP_TRAINER_CUDA
    return makeCudaMlp(shape, deviceIndex, bf16);
#else
    (void)deviceIndex;
    throw ConfigError("model: device \"cuda\" requested but this build has no CUDA support "
                      "(configure with -DDDP_WITH_CUDA=ON)");
#endif
  }
  throw ConfigError("model: device \"auto\" is not resolved (resolveDeviceAndBackend)");
}

}  // namespace ddp
