#include "trainer/model.hpp"

#include <cmath>
#include <random>

#include "rendezvous/base/error.hpp"
#include "trainer/cpu_mlp.hpp"
#ifdef DDP_TRAINER_CUDA
#include "trainer/cuda_mlp.hpp"
#endif

namespace ddp {

std::vector<TensorRange> mlpTensors(const MlpShape& shape) {
  if (shape.inputs <= 0 || shape.classes <= 1) {
    throw ConfigError("model: needs inputs > 0 and classes > 1");
  }
  std::vector<TensorRange> out;
  std::size_t offset = 0;
  int in = shape.inputs;
  auto widths = shape.hidden;
  widths.push_back(shape.classes);
  for (int width : widths) {
    if (width <= 0) throw ConfigError("model: hidden sizes must be positive");
    out.push_back({offset, std::size_t(width) * in});
    offset += std::size_t(width) * in;
    out.push_back({offset, std::size_t(width)});
    offset += std::size_t(width);
    in = width;
  }
  return out;
}

std::vector<float> initMlpParams(const MlpShape& shape, uint64_t seed) {
  auto tensors = mlpTensors(shape);
  std::vector<float> params(tensors.back().offset + tensors.back().count);
  std::mt19937_64 rng(seed);
  int in = shape.inputs;
  for (std::size_t t = 0; t < tensors.size(); t += 2) {
    float bound = 1.0f / std::sqrt(float(in));
    std::uniform_real_distribution<float> u(-bound, bound);
    for (std::size_t k = 0; k < tensors[t].count + tensors[t + 1].count; ++k) {
      params[tensors[t].offset + k] = u(rng);  // weight then bias are adjacent
    }
    in = int(tensors[t + 1].count);
  }
  return params;
}

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
    return std::make_unique<CudaMlp>(shape, deviceIndex, bf16);
#else
    (void)deviceIndex;
    throw ConfigError("model: device \"cuda\" requested but this build has no CUDA support "
                      "(configure with -DDDP_WITH_CUDA=ON)");
#endif
  }
  throw ConfigError("model: device \"auto\" is not resolved (resolveDeviceAndBackend)");
}

}  // namespace ddp
