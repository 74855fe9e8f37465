// Optimizer: SGD (momentum, Nesterov, weight decay) and AdamW with PyTorch's update rules,
// an LR schedule (world-size scaling + linear warmup) and gradient clipping by global norm.
//
// LR at 0-based optimizer step s:  lr(s) = lr * scale * min(1, (s + 1) / warmup_steps)
//   scale = 1 (none), W / base_world_size (linear) or sqrt(W / base_world_size) (sqrt).
// Clipping (clip_grad_norm > 0): after the DDP reduction, when the global L2 norm of all
// gradients exceeds the limit they are multiplied by limit / (norm + 1e-6), like
// torch.nn.utils.clip_grad_norm_.
//
// Thread safety: not thread-safe; owned by the training thread.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "trainer/model.hpp"

namespace ddp {

struct OptimizerConfig {
  std::string type = "adamw";     // "sgd" or "adamw"
  float lr = 1e-3f;               // base learning rate
  float momentum = 0.9f;          // SGD
  bool nesterov = false;          // SGD
  float weightDecay = 0.0f;       // SGD: L2 added to the gradient; AdamW: decoupled decay
  float beta1 = 0.9f, beta2 = 0.999f, eps = 1e-8f;  // AdamW
  std::string lrScaling = "none";  // none | linear | sqrt
  int baseWorldSize = 1;          // world size the base lr was tuned for
  int64_t warmupSteps = 0;        // linear warmup length in optimizer steps (0 = none)
  float clipGradNorm = 0.0f;      // 0 = no clipping
};

class Optimizer {
 public:
  // Throws ConfigError for an unknown type or scaling rule, or a non-positive base world size.
  Optimizer(Model& model, OptimizerConfig config, int worldSize);

  // The world size the LR scaling follows from now on (a quorum recovered in place with another
  // world size). Throws ConfigError like the constructor.
  void setWorldSize(int worldSize);
  // Learning rate used for 0-based step `step`.
  float lrAt(int64_t step) const;
  // Clips, then updates the parameters from the (already reduced) gradients. Returns the global
  // gradient norm before clipping.
  float step(int64_t step);

  // Host copies of the state buffers (SGD: momentum; AdamW: m, v) for checkpoints.
  std::vector<std::vector<float>> saveState();
  // Restores buffers from saveState(). Throws ConfigError when the count or sizes differ.
  void loadState(const std::vector<std::vector<float>>& state);
  // The state buffers themselves, in the model's memory (device memory for a CUDA model), each
  // model.numParams() floats, in saveState()'s order; valid for the optimizer's lifetime. For a
  // peer's state handed over in place (train_recovery.cpp).
  std::vector<float*> stateBuffers();
  const OptimizerConfig& config() const { return config_; }

 private:
  Model& model_;
  OptimizerConfig config_;
  float scale_ = 1.0f;
  std::vector<std::shared_ptr<float>> state_;
};

}  // namespace ddp
