// DistributedSampler: the per-rank index lists of torch.utils.data.DistributedSampler (1.13),
// bit for bit, plus a resume rule for a changed world size.
//
// Epoch order: with shuffle, torch.randperm(n, generator=torch.Generator().manual_seed(seed +
// epoch)) reproduced exactly (torchRandperm below); without, 0..n-1. Then, like torch:
//   drop_last=false: pad by wrapping the order to a multiple of the world size;
//   drop_last=true:  truncate it to a multiple of the world size;
//   rank r takes positions r, r + W, r + 2W, ...
//
// Resume rule (checkpoint/resume): the samples consumed in an epoch are always a prefix of the
// epoch's global (unpadded) order — with per-rank batch b, after k batches every rank has taken
// its first k*b positions, which together are global positions [base, base + k*b*W) where `base`
// is where the current sharding of the epoch started (0 for a fresh epoch). A checkpoint stores
// `consumed` (prefix length), `base` and the world size W of that sharding.
//   Same world size: each rank continues its own list at position (consumed - base) / W —
//   identical to an uninterrupted run.
//   Different world size W': the not yet consumed part of the order, order[consumed:], is
//   re-sharded like a fresh epoch over W' (padded by wrapping or truncated, then rank-strided),
//   and `base` becomes `consumed`. Every remaining sample is seen once (plus padding); no
//   consumed sample is repeated except as padding. consumed >= n means the epoch is done.
//
// Thread safety: a plain value; methods are const.
#pragma once

#include <cstdint>
#include <vector>

namespace ddp {

// torch.randperm(n, generator) for a CPU generator seeded with manual_seed(seed) (torch 1.13).
std::vector<int64_t> torchRandperm(int64_t n, uint64_t seed);

struct SamplerOptions {
  int64_t datasetSize = 0;
  int worldSize = 1;
  int rank = 0;
  bool shuffle = true;
  uint64_t seed = 0;
  bool dropLast = false;
};

class DistributedSampler {
 public:
  // Throws ConfigError when rank is outside [0, worldSize) or the dataset is empty.
  explicit DistributedSampler(SamplerOptions options);

  // Samples per rank in a fresh epoch (torch's num_samples).
  int64_t numSamples() const;
  // torch's list(iter(sampler)) after sampler.set_epoch(epoch).
  std::vector<int64_t> indices(int64_t epoch) const;
  // Where a resumed epoch continues (see the resume rule above).
  struct Resume {
    std::vector<int64_t> indices;  // this rank's remaining list
    int64_t base = 0;              // start of the sharding these lists come from
  };
  // This rank's remaining list for `epoch` after `consumed` global positions were taken from a
  // sharding that started at `base` over `shardWorld` ranks.
  Resume resume(int64_t epoch, int64_t base, int64_t consumed, int shardWorld) const;

 private:
  std::vector<int64_t> order(int64_t epoch) const;
  std::vector<int64_t> shard(std::vector<int64_t> order) const;

  SamplerOptions options_;
};

}  // namespace ddp
