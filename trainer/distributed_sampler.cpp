#include "trainer/distributed_sampler.hpp"

#include <limits>
#include <numeric>
#include <random>

#include "rendezvous/base/error.hpp"

namespace ddp {

std::vector<int64_t> torchRandperm(int64_t n, uint64_t seed) {
  // at::CPUGeneratorImpl is an mt19937 seeded with the low 32 bits of the seed; random() is one
  // 32-bit draw, random64() is (draw1 << 32) | draw2 (aten/src/ATen/native/TensorFactories.cpp).
  std::mt19937 engine(static_cast<uint32_t>(seed & 0xffffffffu));
  std::vector<int64_t> r(static_cast<std::size_t>(n));
  if (n < static_cast<int64_t>(std::numeric_limits<uint32_t>::max() / 20)) {
    std::iota(r.begin(), r.end(), 0);
    for (int64_t i = 0; i < n - 1; ++i) {
      int64_t z = static_cast<int64_t>(engine() % static_cast<uint64_t>(n - i));
      std::swap(r[i], r[z + i]);
    }
    return r;
  }
  for (int64_t i = 0; i < n; ++i) {  // torch's "inside-out" Fisher-Yates for huge n
    uint64_t hi = engine();
    uint64_t lo = engine();
    auto z = static_cast<int64_t>(((hi << 32) | lo) % static_cast<uint64_t>(i + 1));
    r[i] = r[z];
    r[z] = i;
  }
  return r;
}

DistributedSampler::DistributedSampler(SamplerOptions options) : options_(options) {
  if (options_.worldSize < 1 || options_.rank < 0 || options_.rank >= options_.worldSize) {
    throw ConfigError("sampler: rank " + std::to_string(options_.rank) + " outside world of " +
                      std::to_string(options_.worldSize));
  }
  if (options_.datasetSize <= 0) throw ConfigError("sampler: the dataset is empty");
}

int64_t DistributedSampler::numSamples() const {
  int64_t n = options_.datasetSize, w = options_.worldSize;
  if (options_.dropLast && n % w != 0) return (n - w + w - 1) / w;  // ceil((n - w) / w)
  return (n + w - 1) / w;
}

std::vector<int64_t> DistributedSampler::order(int64_t epoch) const {
  if (options_.shuffle) {
    return torchRandperm(options_.datasetSize, options_.seed + static_cast<uint64_t>(epoch));
  }
  std::vector<int64_t> r(static_cast<std::size_t>(options_.datasetSize));
  std::iota(r.begin(), r.end(), 0);
  return r;
}

std::vector<int64_t> DistributedSampler::shard(std::vector<int64_t> idx) const {
  const auto w = static_cast<std::size_t>(options_.worldSize);
  const std::size_t n = idx.size();
  if (n == 0) return {};
  std::size_t perRank = (options_.dropLast && n % w != 0) ? (n - w + w - 1) / w : (n + w - 1) / w;
  if (options_.dropLast && n < w) perRank = 0;
  std::size_t total = perRank * w;
  if (!options_.dropLast) {
    for (std::size_t i = 0; idx.size() < total; ++i) idx.push_back(idx[i % n]);
  }
  idx.resize(total);
  std::vector<int64_t> out;
  out.reserve(perRank);
  for (std::size_t i = static_cast<std::size_t>(options_.rank); i < total; i += w) out.push_back(idx[i]);
  return out;
}

std::vector<int64_t> DistributedSampler::indices(int64_t epoch) const { return shard(order(epoch)); }

DistributedSampler::Resume DistributedSampler::resume(int64_t epoch, int64_t base,
                                                      int64_t consumed, int shardWorld) const {
  auto full = order(epoch);
  const auto n = static_cast<int64_t>(full.size());
  if (base < 0 || consumed < base) {
    throw ConfigError("sampler: bad resume position (base " + std::to_string(base) +
                      ", consumed " + std::to_string(consumed) + ")");
  }
  if (shardWorld == options_.worldSize && base < n) {
    auto all = shard({full.begin() + base, full.end()});
    auto skip = static_cast<std::size_t>((consumed - base) / options_.worldSize);
    if (skip >= all.size()) return {{}, base};
    return {{all.begin() + static_cast<std::ptrdiff_t>(skip), all.end()}, base};
  }
  if (consumed >= n) return {{}, consumed};
  return {shard({full.begin() + consumed, full.end()}), consumed};
}

}  // namespace ddp
