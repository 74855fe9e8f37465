// ShardFormat: the on-disk layout of a sharded classification dataset (writer and validator).
//
// A dataset is a directory holding `index.json` and K shard files.
//
// index.json (UTF-8 JSON object):
//   {"format": "ddp-shards", "version": 1, "samples": N, "features": F, "classes": C,
//    "dtype": "float32", "label_dtype": "int32", "endianness": "little", "seed": S,
//    "shards": [{"file": "shard-00000.bin", "samples": n0}, ...]}
//   The shards are concatenated in index order: global sample i lives in the first shard whose
//   cumulative sample count exceeds i.
//
// Shard file (all integers little-endian):
//   offset  size  field
//   0       8     magic "DDPSHRD1"
//   8       4     uint32 version (1)
//   12      4     uint32 features F
//   16      4     uint32 classes C
//   20      4     uint32 reserved (0)
//   24      8     uint64 samples n
//   32      4*n*F float32 features, row-major (sample-major: sample j's F values are contiguous)
//   ...     4*n   int32 labels in [0, C)
//   The file size is exactly 32 + 4*n*F + 4*n bytes.
//
// Thread safety: plain functions and values.
#pragma once

#include <cstdint>
#include <filesystem>
#include <string>
#include <vector>

namespace ddp {

inline constexpr char kShardMagic[8] = {'D', 'D', 'P', 'S', 'H', 'R', 'D', '1'};
inline constexpr uint32_t kShardVersion = 1;
inline constexpr std::size_t kShardHeaderBytes = 32;

struct ShardInfo {
  std::string file;      // file name relative to the dataset directory
  uint64_t samples = 0;  // samples in this shard
};

struct DatasetIndex {
  uint64_t samples = 0;
  uint32_t features = 0;
  uint32_t classes = 0;
  uint64_t seed = 0;
  std::vector<ShardInfo> shards;
};

// Expected size in bytes of a shard file holding `samples` samples of `features` features.
uint64_t shardFileBytes(uint64_t samples, uint32_t features);

// Encodes the 32-byte shard header.
std::vector<char> encodeShardHeader(uint64_t samples, uint32_t features, uint32_t classes);

// Writes <dir>/index.json. Throws ConfigError when the file cannot be written.
void writeDatasetIndex(const std::filesystem::path& dir, const DatasetIndex& index);

// Reads and validates <dir>/index.json (fields present, types, shard counts summing to
// `samples`). Throws ConfigError naming the file and the problem.
DatasetIndex readDatasetIndex(const std::filesystem::path& dir);

}  // namespace ddp
