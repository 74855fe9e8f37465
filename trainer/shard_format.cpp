#include "trainer/shard_format.hpp"

#include <cstring>
#include <fstream>

#include <nlohmann/json.hpp>

#include "rendezvous/base/error.hpp"

namespace ddp {
namespace {

void putLe(std::vector<char>& out, std::size_t at, uint64_t value, int bytes) {
  for (int i = 0; i < bytes; ++i) out[at + i] = static_cast<char>((value >> (8 * i)) & 0xff);
}

template <typename T>
T field(const nlohmann::json& j, const char* name, const std::filesystem::path& file) {
  if (!j.contains(name)) {
    throw ConfigError("dataset index " + file.string() + ": missing field '" + name + "'");
  }
  try {
    return j.at(name).get<T>();
  } catch (const nlohmann::json::exception&) {
    throw ConfigError("dataset index " + file.string() + ": field '" + name +
                      "' has the wrong type: " + j.at(name).dump());
  }
}

void expectString(const nlohmann::json& j, const char* name, const std::string& want,
                  const std::filesystem::path& file) {
  auto got = field<std::string>(j, name, file);
  if (got != want) {
    throw ConfigError("dataset index " + file.string() + ": field '" + name + "' is '" + got +
                      "', this reader supports only '" + want + "'");
  }
}

}  // namespace

uint64_t shardFileBytes(uint64_t samples, uint32_t features) {
  return kShardHeaderBytes + 4 * samples * features + 4 * samples;
}

std::vector<char> encodeShardHeader(uint64_t samples, uint32_t features, uint32_t classes) {
  std::vector<char> header(kShardHeaderBytes, 0);
  std::memcpy(header.data(), kShardMagic, sizeof(kShardMagic));
  putLe(header, 8, kShardVersion, 4);
  putLe(header, 12, features, 4);
  putLe(header, 16, classes, 4);
  putLe(header, 24, samples, 8);
  return header;
}

void writeDatasetIndex(const std::filesystem::path& dir, const DatasetIndex& index) {
  nlohmann::json j = {{"format", "ddp-shards"},   {"version", kShardVersion},
                      {"samples", index.samples}, {"features", index.features},
                      {"classes", index.classes}, {"dtype", "float32"},
                      {"label_dtype", "int32"},   {"endianness", "little"},
                      {"seed", index.seed}};
  j["shards"] = nlohmann::json::array();
  for (const auto& s : index.shards) j["shards"].push_back({{"file", s.file}, {"samples", s.samples}});
  auto path = dir / "index.json";
  std::ofstream out(path, std::ios::trunc);
  out << j.dump(2) << "\n";
  out.flush();
  if (!out) throw ConfigError("cannot write dataset index " + path.string());
}

DatasetIndex readDatasetIndex(const std::filesystem::path& dir) {
  auto path = dir / "index.json";
  std::ifstream in(path);
  if (!in) throw ConfigError("dataset index " + path.string() + " not found (run `train make-data`)");
  nlohmann::json j;
  try {
    j = nlohmann::json::parse(in);
  } catch (const nlohmann::json::exception& e) {
    throw ConfigError("dataset index " + path.string() + " is not valid JSON: " + e.what());
  }
  expectString(j, "format", "ddp-shards", path);
  expectString(j, "dtype", "float32", path);
  expectString(j, "label_dtype", "int32", path);
  expectString(j, "endianness", "little", path);
  if (field<uint32_t>(j, "version", path) != kShardVersion) {
    throw ConfigError("dataset index " + path.string() + ": unsupported version " +
                      j.at("version").dump());
  }
  DatasetIndex index;
  index.samples = field<uint64_t>(j, "samples", path);
  index.features = field<uint32_t>(j, "features", path);
  index.classes = field<uint32_t>(j, "classes", path);
  index.seed = j.value("seed", uint64_t{0});
  if (index.samples == 0 || index.features == 0 || index.classes < 2) {
    throw ConfigError("dataset index " + path.string() +
                      ": needs samples > 0, features > 0 and classes >= 2");
  }
  uint64_t total = 0;
  for (const auto& s : field<nlohmann::json>(j, "shards", path)) {
    ShardInfo info{field<std::string>(s, "file", path), field<uint64_t>(s, "samples", path)};
    if (info.file.find('/') != std::string::npos || info.file.empty()) {
      throw ConfigError("dataset index " + path.string() + ": bad shard file name '" + info.file + "'");
    }
    total += info.samples;
    index.shards.push_back(std::move(info));
  }
  if (total != index.samples) {
    throw ConfigError("dataset index " + path.string() + ": shards hold " + std::to_string(total) +
                      " samples but 'samples' is " + std::to_string(index.samples));
  }
  return index;
}

}  // namespace ddp
