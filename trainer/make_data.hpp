// makeSyntheticData: writes a learnable synthetic classification dataset in the ShardFormat.
//
// Features are i.i.d. N(0, 1). Labels come from a fixed random "teacher" network drawn from the
// same seed: logits = W2 · tanh(W1 · x + b1) + b2 (hidden width max(16, F), weights N(0, 1/fan_in)),
// label = argmax(logits). A student MLP can therefore reach a loss near zero.
//
// Thread safety: a plain function; do not write two datasets to the same directory at once.
#pragma once

#include <cstdint>
#include <filesystem>

namespace ddp {

struct MakeDataOptions {
  std::filesystem::path out;  // directory to create (or reuse); existing shard files are replaced
  uint64_t samples = 10000;   // total samples
  uint32_t features = 32;     // floats per sample
  uint32_t classes = 10;      // label range [0, classes)
  uint32_t shards = 4;        // shard files; samples are spread as evenly as possible
  uint64_t seed = 0;          // seeds both the teacher and the features
};

// Writes the shards and index.json. Blocks on disk I/O. Throws ConfigError for invalid options or
// a directory/file that cannot be written.
void makeSyntheticData(const MakeDataOptions& options);

}  // namespace ddp
