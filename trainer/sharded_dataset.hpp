// ShardedDataset: read-only, memory-mapped view of a dataset written in the ShardFormat
// (trainer/shard_format.hpp).
//
// Opening validates every shard against the index (magic, version, features, classes, sample
// count, exact file size) and throws ConfigError with one line naming the file and the problem.
// Samples are then read straight from the mapped pages; nothing is copied at open time.
//
// Thread safety: after construction all methods are const and safe to call from many threads.
#pragma once

#include <cstdint>
#include <filesystem>
#include <vector>

#include "trainer/shard_format.hpp"

namespace ddp {

class ShardedDataset {
 public:
  // Maps every shard of the dataset in `dir`. Throws ConfigError (missing, truncated or
  // mismatched file, bad index).
  explicit ShardedDataset(const std::filesystem::path& dir);
  ~ShardedDataset();
  ShardedDataset(const ShardedDataset&) = delete;
  ShardedDataset& operator=(const ShardedDataset&) = delete;

  const DatasetIndex& index() const { return index_; }
  uint64_t size() const { return index_.samples; }
  uint32_t features() const { return index_.features; }
  uint32_t classes() const { return index_.classes; }

  // Copies the samples `ids` (global indices < size()) into x (ids.size() * features floats,
  // row-major) and y (ids.size() labels). Does not block; throws ConfigError for an index out of
  // range.
  void gather(const std::vector<int64_t>& ids, float* x, int32_t* y) const;

 private:
  struct Mapping {
    void* base = nullptr;
    std::size_t bytes = 0;
    const float* features = nullptr;
    const int32_t* labels = nullptr;
  };
  void mapShard(const std::filesystem::path& path, const ShardInfo& info);

  DatasetIndex index_;
  std::vector<Mapping> maps_;
  std::vector<uint64_t> starts_;  // global index of each shard's first sample
};

}  // namespace ddp
