#include "trainer/sharded_dataset.hpp"

#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <bit>
#include <cerrno>
#include <cstring>

#include "rendezvous/base/error.hpp"

namespace ddp {
namespace {

static_assert(std::endian::native == std::endian::little, "shards are mapped as little-endian");

uint64_t getLe(const unsigned char* p, int bytes) {
  uint64_t v = 0;
  for (int i = bytes - 1; i >= 0; --i) v = (v << 8) | p[i];
  return v;
}

void checkHeader(const std::filesystem::path& path, const unsigned char* h, const ShardInfo& info,
                 const DatasetIndex& index) {
  auto fail = [&](const std::string& what) {
    throw ConfigError("dataset shard " + path.string() + ": " + what);
  };
  if (std::memcmp(h, kShardMagic, sizeof(kShardMagic)) != 0) fail("not a ddp shard (bad magic)");
  if (getLe(h + 8, 4) != kShardVersion) fail("unsupported version " + std::to_string(getLe(h + 8, 4)));
  if (getLe(h + 12, 4) != index.features || getLe(h + 16, 4) != index.classes) {
    fail("holds " + std::to_string(getLe(h + 12, 4)) + " features / " +
         std::to_string(getLe(h + 16, 4)) + " classes, index.json says " +
         std::to_string(index.features) + " / " + std::to_string(index.classes));
  }
  if (getLe(h + 24, 8) != info.samples) {
    fail("holds " + std::to_string(getLe(h + 24, 8)) + " samples, index.json says " +
         std::to_string(info.samples));
  }
}

}  // namespace

ShardedDataset::ShardedDataset(const std::filesystem::path& dir) : index_(readDatasetIndex(dir)) {
  uint64_t start = 0;
  try {
    for (const auto& info : index_.shards) {
      starts_.push_back(start);
      mapShard(dir / info.file, info);
      start += info.samples;
    }
  } catch (...) {
    for (auto& m : maps_) ::munmap(m.base, m.bytes);
    throw;
  }
}

ShardedDataset::~ShardedDataset() {
  for (auto& m : maps_) ::munmap(m.base, m.bytes);
}

void ShardedDataset::mapShard(const std::filesystem::path& path, const ShardInfo& info) {
  int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) {
    throw ConfigError("dataset shard " + path.string() + ": cannot open: " + std::strerror(errno));
  }
  struct stat st {};
  ::fstat(fd, &st);
  uint64_t want = shardFileBytes(info.samples, index_.features);
  if (static_cast<uint64_t>(st.st_size) != want) {
    ::close(fd);
    throw ConfigError("dataset shard " + path.string() + ": " + std::to_string(st.st_size) +
                      " bytes, expected " + std::to_string(want) +
                      (static_cast<uint64_t>(st.st_size) < want ? " (truncated)" : " (trailing bytes)"));
  }
  void* base = ::mmap(nullptr, want, PROT_READ, MAP_SHARED, fd, 0);
  ::close(fd);
  if (base == MAP_FAILED) {
    throw ConfigError("dataset shard " + path.string() + ": mmap failed: " + std::strerror(errno));
  }
  auto* bytes = static_cast<const unsigned char*>(base);
  try {
    checkHeader(path, bytes, info, index_);
  } catch (...) {
    ::munmap(base, want);
    throw;
  }
  Mapping m{base, want, reinterpret_cast<const float*>(bytes + kShardHeaderBytes), nullptr};
  m.labels = reinterpret_cast<const int32_t*>(bytes + kShardHeaderBytes +
                                              4 * info.samples * index_.features);
  maps_.push_back(m);
}

void ShardedDataset::gather(const std::vector<int64_t>& ids, float* x, int32_t* y) const {
  const std::size_t f = index_.features;
  for (std::size_t k = 0; k < ids.size(); ++k) {
    auto id = static_cast<uint64_t>(ids[k]);
    if (ids[k] < 0 || id >= index_.samples) {
      throw ConfigError("sample index " + std::to_string(ids[k]) + " out of range [0, " +
                        std::to_string(index_.samples) + ")");
    }
    auto it = std::upper_bound(starts_.begin(), starts_.end(), id);
    std::size_t shard = static_cast<std::size_t>(it - starts_.begin()) - 1;
    uint64_t local = id - starts_[shard];
    std::memcpy(x + k * f, maps_[shard].features + local * f, f * sizeof(float));
    y[k] = maps_[shard].labels[local];
    if (y[k] < 0 || static_cast<uint32_t>(y[k]) >= index_.classes) {
      throw ConfigError("dataset sample " + std::to_string(id) + " has label " +
                        std::to_string(y[k]) + " outside [0, " + std::to_string(index_.classes) + ")");
    }
  }
}

}  // namespace ddp
