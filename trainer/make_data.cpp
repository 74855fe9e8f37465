#include "trainer/make_data.hpp"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <fstream>
#include <random>
#include <vector>

#include "rendezvous/base/error.hpp"
#include "trainer/shard_format.hpp"

namespace ddp {
namespace {

struct Teacher {
  uint32_t features, hidden, classes;
  std::vector<float> w1, b1, w2, b2;

  Teacher(uint32_t f, uint32_t c, std::mt19937_64& rng)
      : features(f), hidden(std::max<uint32_t>(16, f)), classes(c) {
    std::normal_distribution<float> n1(0.0f, 1.0f / std::sqrt(float(f)));
    std::normal_distribution<float> n2(0.0f, 1.0f / std::sqrt(float(hidden)));
    w1.resize(size_t(hidden) * f);
    b1.resize(hidden);
    w2.resize(size_t(classes) * hidden);
    b2.resize(classes);
    for (auto& v : w1) v = n1(rng);
    for (auto& v : b1) v = 0.1f * n1(rng);
    for (auto& v : w2) v = n2(rng);
    for (auto& v : b2) v = 0.1f * n2(rng);
  }

  int32_t label(const float* x) const {
    std::vector<float> h(hidden);
    for (uint32_t j = 0; j < hidden; ++j) {
      float s = b1[j];
      for (uint32_t i = 0; i < features; ++i) s += w1[size_t(j) * features + i] * x[i];
      h[j] = std::tanh(s);
    }
    int32_t best = 0;
    float bestValue = -INFINITY;
    for (uint32_t c = 0; c < classes; ++c) {
      float s = b2[c];
      for (uint32_t j = 0; j < hidden; ++j) s += w2[size_t(c) * hidden + j] * h[j];
      if (s > bestValue) bestValue = s, best = int32_t(c);
    }
    return best;
  }
};

void writeShard(const std::filesystem::path& path, uint64_t n, const MakeDataOptions& o,
                const Teacher& teacher, std::mt19937_64& rng) {
  std::normal_distribution<float> normal(0.0f, 1.0f);
  std::vector<float> x(n * o.features);
  std::vector<int32_t> y(n);
  for (uint64_t s = 0; s < n; ++s) {
    for (uint32_t i = 0; i < o.features; ++i) x[s * o.features + i] = normal(rng);
    y[s] = teacher.label(&x[s * o.features]);
  }
  auto tmp = path;
  tmp += ".tmp";
  std::ofstream out(tmp, std::ios::binary | std::ios::trunc);
  auto header = encodeShardHeader(n, o.features, o.classes);
  out.write(header.data(), std::streamsize(header.size()));
  out.write(reinterpret_cast<const char*>(x.data()), std::streamsize(x.size() * sizeof(float)));
  out.write(reinterpret_cast<const char*>(y.data()), std::streamsize(y.size() * sizeof(int32_t)));
  out.close();
  if (!out) throw ConfigError("cannot write dataset shard " + tmp.string());
  std::filesystem::rename(tmp, path);
}

}  // namespace

void makeSyntheticData(const MakeDataOptions& o) {
  if (o.samples == 0 || o.features == 0 || o.classes < 2 || o.shards == 0 || o.shards > o.samples) {
    throw ConfigError("make-data: need samples > 0, features > 0, classes >= 2 and "
                      "1 <= shards <= samples (got samples=" + std::to_string(o.samples) +
                      " features=" + std::to_string(o.features) + " classes=" +
                      std::to_string(o.classes) + " shards=" + std::to_string(o.shards) + ")");
  }
  std::error_code ec;
  std::filesystem::create_directories(o.out, ec);
  if (ec) throw ConfigError("make-data: cannot create " + o.out.string() + ": " + ec.message());
  std::mt19937_64 rng(o.seed);
  Teacher teacher(o.features, o.classes, rng);
  DatasetIndex index{o.samples, o.features, o.classes, o.seed, {}};
  for (uint32_t k = 0; k < o.shards; ++k) {
    uint64_t n = o.samples / o.shards + (k < o.samples % o.shards ? 1 : 0);
    char name[32];
    std::snprintf(name, sizeof(name), "shard-%05u.bin", k);
    writeShard(o.out / name, n, o, teacher, rng);
    index.shards.push_back({name, n});
  }
  writeDatasetIndex(o.out, index);
}

}  // namespace ddp
