// TrainConfig: everything `train --config FILE` reads, from one flat JSON object.
//
// Keys (all optional except data; defaults in the struct below; unknown keys are an error so a
// typo never silently falls back to a default):
//   data, hidden, device, bf16, seed, epochs, max_steps, batch_size, grad_accum, shuffle,
//   drop_last, optimizer, lr, momentum, nesterov, weight_decay, beta1, beta2, eps, lr_scaling,
//   base_world_size, warmup_steps, clip_grad_norm, bucket_mb, shm_allreduce, comm_overlap,
//   check_params_every, backend, comm_timeout_s, checkpoint_dir, checkpoint_every, metrics,
//   tensorboard_dir, log_every, progress_seconds.
// Relative paths are used as given (relative to the worker's working directory).
//
// device and backend are parsed into enums with the file (one grammar each); "auto" in either is
// resolved once, by resolveDeviceAndBackend(), before anything builds a model or a communicator.
// Ranges are checked once, by validateTrainConfig(), once every override is in.
//
// Thread safety: a plain value.
#pragma once

#include <cstdint>
#include <filesystem>
#include <string>
#include <vector>

#include "trainer/optimizer.hpp"
#include "worker_runtime/communicator.hpp"

namespace ddp {

struct TrainConfig {
  std::string data;                   // dataset directory (train make-data --out)
  std::vector<int> hidden{128, 128};  // hidden layer widths
  TrainDevice device = TrainDevice::kAuto;  // auto | cpu | cuda (auto: cuda when present, else cpu)
  bool bf16 = false;                  // CUDA only: bf16 GEMMs, fp32 accumulate and master weights
  uint64_t seed = 0;                  // sampler seed (seed + epoch) and parameter init seed
  int64_t epochs = 1;                 // epochs to run
  int64_t maxSteps = 0;               // stop after this many optimizer steps (0 = no limit)
  int batchSize = 64;                 // per-rank micro-batch size
  int gradAccum = 1;                  // micro-batches per optimizer step
  bool shuffle = true;                // DistributedSampler shuffle
  bool dropLast = false;              // DistributedSampler drop_last
  OptimizerConfig optimizer;          // optimizer, lr, momentum, ... (see optimizer.hpp)
  double bucketMb = 25.0;             // DDP bucket size in MiB
  bool shmAllreduce = true;           // CPU: gradient allreduce through shared memory when every
                                      // rank is on this node (else Gloo)
  std::string commOverlap = "auto";   // auto | on | off: reduce buckets on a communication
                                      // thread during backward (auto: overlapGradientAllreduce)
  int64_t checkParamsEvery = 0;       // hash-compare parameters across ranks every N steps (0 = off)
  CommBackend backend = CommBackend::kAuto;  // auto | gloo | nccl (auto: follows the device)
  double commTimeoutS = 300.0;        // communicator setup and per-collective budget
  std::string checkpointDir;          // "" = no checkpoints
  int64_t checkpointEvery = 100;      // steps between checkpoints (0 = only at the end)
  std::string metrics;                // JSON-lines file ("" = none)
  std::string tensorboardDir;         // TensorBoard event directory ("" = none)
  int64_t logEvery = 10;              // steps between metrics lines
  double progressSeconds = 5.0;       // seconds between console progress lines
};

// Reads and validates a config file. Throws ConfigError naming the file and the key.
TrainConfig loadTrainConfig(const std::filesystem::path& file);
// Parses a JSON text (`source` names it in errors). Throws ConfigError.
TrainConfig parseTrainConfig(const std::string& text, const std::string& source);
// Checks ranges (batch_size >= 1, ...). Throws ConfigError naming the key.
void validateTrainConfig(const TrainConfig& config);

// "auto" | "cpu" | "cuda" and "auto" | "gloo" | "nccl" (the config keys and --backend). Throw
// ConfigError naming the key and the text.
TrainDevice parseTrainDevice(const std::string& name);
CommBackend parseCommBackend(const std::string& name);
// "auto", "cpu", "cuda"; "auto", "gloo", "nccl". Never throw.
std::string deviceName(TrainDevice device);
std::string backendName(CommBackend backend);

// Resolves "auto" once: the backend follows the device (cuda: nccl, cpu: gloo); with both auto,
// nccl on cuda when `cudaPresent` (train passes cudaDevicesPresent()), else gloo on cpu; a device
// left auto follows the backend. Afterwards neither is auto. Throws ConfigError when the two do
// not fit (cuda needs nccl, cpu needs gloo). Pure.
void resolveDeviceAndBackend(TrainConfig& config, bool cudaPresent);

}  // namespace ddp
