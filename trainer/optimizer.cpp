#include "trainer/optimizer.hpp"

#include <algorithm>
#include <cmath>

#include "rendezvous/base/error.hpp"

namespace ddp {

Optimizer::Optimizer(Model& model, OptimizerConfig config, int worldSize)
    : model_(model), config_(std::move(config)) {
  if (config_.baseWorldSize <= 0) throw ConfigError("optimizer: base_world_size must be >= 1");
  setWorldSize(worldSize);
  int buffers = 0;
  if (config_.type == "sgd") {
    buffers = 1;
  } else if (config_.type == "adamw") {
    buffers = 2;
  } else {
    throw ConfigError("optimizer: unknown type \"" + config_.type + "\" (use sgd or adamw)");
  }
  for (int i = 0; i < buffers; ++i) state_.push_back(model_.allocBuffer(model_.numParams()));
}

void Optimizer::setWorldSize(int worldSize) {
  const float ratio = float(worldSize) / float(config_.baseWorldSize);
  if (config_.lrScaling == "none") {
    scale_ = 1.0f;
  } else if (config_.lrScaling == "linear") {
    scale_ = ratio;
  } else if (config_.lrScaling == "sqrt") {
    scale_ = std::sqrt(ratio);
  } else {
    throw ConfigError("optimizer: lr_scaling \"" + config_.lrScaling + "\" (use none, linear or sqrt)");
  }
}

float Optimizer::lrAt(int64_t step) const {
  float warm = 1.0f;
  if (config_.warmupSteps > 0) {
    warm = std::min(1.0f, float(step + 1) / float(config_.warmupSteps));
  }
  return config_.lr * scale_ * warm;
}

float Optimizer::step(int64_t step) {
  const double norm = std::sqrt(model_.gradSquaredNorm());
  if (config_.clipGradNorm > 0.0f && norm > config_.clipGradNorm) {
    model_.scaleGrads(float(config_.clipGradNorm / (norm + 1e-6)));
  }
  const float lr = lrAt(step);
  if (config_.type == "sgd") {
    model_.sgdUpdate({lr, config_.momentum, config_.weightDecay, config_.nesterov}, state_[0].get());
  } else {
    AdamWHyper h{lr, config_.beta1, config_.beta2, config_.eps, config_.weightDecay, step + 1};
    model_.adamwUpdate(h, state_[0].get(), state_[1].get());
  }
  return float(norm);
}

std::vector<std::vector<float>> Optimizer::saveState() {
  std::vector<std::vector<float>> out;
  for (auto& buf : state_) {
    out.emplace_back(model_.numParams());
    model_.download(buf.get(), out.back().data(), model_.numParams());
  }
  return out;
}

std::vector<float*> Optimizer::stateBuffers() {
  std::vector<float*> out;
  for (auto& buf : state_) out.push_back(buf.get());
  return out;
}

void Optimizer::loadState(const std::vector<std::vector<float>>& state) {
  if (state.size() != state_.size()) {
    throw ConfigError("checkpoint holds " + std::to_string(state.size()) +
                      " optimizer buffers, optimizer \"" + config_.type + "\" needs " +
                      std::to_string(state_.size()));
  }
  for (std::size_t i = 0; i < state.size(); ++i) {
    if (state[i].size() != model_.numParams()) {
      throw ConfigError("checkpoint optimizer buffer has " + std::to_string(state[i].size()) +
                        " values, the model has " + std::to_string(model_.numParams()));
    }
    model_.upload(state[i].data(), state_[i].get(), model_.numParams());
  }
}

}  // namespace ddp
