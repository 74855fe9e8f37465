// Checkpoint: the training state rank 0 saves and every rank resumes from.
//
// File `<dir>/checkpoint.bin` (little-endian):
//   8 bytes   magic "DDPCKPT1"
//   8 bytes   uint64 length L of the JSON metadata
//   L bytes   JSON: version, epoch, step, consumed, shard_base, shard_world, world_size,
//             generation, sampler_seed, init_seed, optimizer, num_params, state_buffers,
//             inputs, hidden, classes
//   4*N       float32 parameters (N = num_params, Model layout)
//   4*N each  optimizer state buffers (SGD: momentum; AdamW: m then v)
//   4 bytes   uint32 CRC-32C of everything before it
// All randomness of a run derives from sampler_seed (+ epoch) and init_seed, so these two plus
// the sampler position (epoch, consumed, shard_base, shard_world) are the RNG state.
//
// Writing is atomic: a temporary in the same directory (checkpoint.bin.tmp.<pid>) is written,
// fsync'ed and renamed over the old file, then the directory is fsync'ed — a crash leaves the old
// or the new checkpoint, never a torn one. A writer killed mid-write leaves its temporary behind;
// the next run's rank 0 removes such leftovers at start (removeStaleTemporaries).
//
// Thread safety: plain functions; one writer per directory (rank 0).
#pragma once

#include <cstdint>
#include <filesystem>
#include <optional>
#include <string>
#include <vector>

#include "trainer/model.hpp"

namespace ddp {

struct TrainState {
  int64_t epoch = 0;       // epoch to run next (or the one in progress)
  int64_t step = 0;        // optimizer steps done
  int64_t consumed = 0;    // global positions of `epoch` already consumed (sampler resume rule)
  int64_t shardBase = 0;   // where the current sharding of `epoch` started
  int shardWorld = 1;      // world size of that sharding
  int worldSize = 1;       // world size that wrote the checkpoint
  int generation = 0;      // TORCHELASTIC_RESTART_COUNT that wrote it
  uint64_t samplerSeed = 0, initSeed = 0;
};

struct Checkpoint {
  TrainState state;
  std::string optimizer;                    // "sgd" | "adamw"
  MlpShape shape;
  std::vector<float> params;
  std::vector<std::vector<float>> optimizerState;
};

std::filesystem::path checkpointPath(const std::filesystem::path& dir);

// Writes atomically (see above). Blocks on disk I/O. Throws ddp::Error naming the path.
void saveCheckpoint(const std::filesystem::path& dir, const Checkpoint& ckpt);

// Removes the temporaries (checkpoint.bin.tmp.*) that writers killed mid-write left in `dir`; call
// it while no writer runs (rank 0, at start). Returns how many it removed. Never throws.
std::size_t removeStaleTemporaries(const std::filesystem::path& dir);

// Loads `<dir>/checkpoint.bin`; nullopt when there is none. Throws ConfigError for a damaged or
// foreign file (bad magic, CRC mismatch, sizes inconsistent).
std::optional<Checkpoint> loadCheckpoint(const std::filesystem::path& dir);

}  // namespace ddp
