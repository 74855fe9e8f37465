// mlpTensors and initMlpParams (model.hpp): in a file of their own because the CUDA model module
// (cuda_module.hpp) compiles them too, so that it needs no symbol of the executable loading it.
#include <cmath>
#include <random>

#include "rendezvous/base/error.hpp"
#include "trainer/model.hpp"

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

}  // namespace ddp
