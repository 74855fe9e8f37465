#include "trainer/checkpoint.hpp"

#include <fcntl.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <fstream>
#include <iterator>

#include <nlohmann/json.hpp>

#include "rendezvous/base/error.hpp"
#include "trainer/crc32c.hpp"

namespace ddp {
namespace {

constexpr char kMagic[8] = {'D', 'D', 'P', 'C', 'K', 'P', 'T', '1'};

void appendU64(std::string& out, uint64_t v) {
  for (int i = 0; i < 8; ++i) out.push_back(static_cast<char>((v >> (8 * i)) & 0xff));
}

void appendFloats(std::string& out, const std::vector<float>& v) {
  out.append(reinterpret_cast<const char*>(v.data()), v.size() * sizeof(float));
}

void writeAllAndSync(const std::filesystem::path& path, const std::string& bytes) {
  int fd = ::open(path.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
  if (fd < 0) throw Error("checkpoint: cannot create " + path.string() + ": " + std::strerror(errno));
  std::size_t done = 0;
  while (done < bytes.size()) {
    ssize_t n = ::write(fd, bytes.data() + done, bytes.size() - done);
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) {
      int err = errno;
      ::close(fd);
      throw Error("checkpoint: writing " + path.string() + " failed: " + std::strerror(err));
    }
    done += static_cast<std::size_t>(n);
  }
  if (::fsync(fd) != 0 || ::close(fd) != 0) {
    throw Error("checkpoint: fsync/close of " + path.string() + " failed: " + std::strerror(errno));
  }
}

nlohmann::json metadata(const Checkpoint& c) {
  const auto& s = c.state;
  return {{"version", 1},           {"epoch", s.epoch},
          {"step", s.step},         {"consumed", s.consumed},
          {"shard_base", s.shardBase}, {"shard_world", s.shardWorld},
          {"world_size", s.worldSize}, {"generation", s.generation},
          {"sampler_seed", s.samplerSeed}, {"init_seed", s.initSeed},
          {"optimizer", c.optimizer}, {"num_params", c.params.size()},
          {"state_buffers", c.optimizerState.size()}, {"inputs", c.shape.inputs},
          {"hidden", c.shape.hidden}, {"classes", c.shape.classes}};
}

Checkpoint fromMetadata(const nlohmann::json& j) {
  Checkpoint c;
  auto& s = c.state;
  s.epoch = j.at("epoch");
  s.step = j.at("step");
  s.consumed = j.at("consumed");
  s.shardBase = j.at("shard_base");
  s.shardWorld = j.at("shard_world");
  s.worldSize = j.at("world_size");
  s.generation = j.at("generation");
  s.samplerSeed = j.at("sampler_seed");
  s.initSeed = j.at("init_seed");
  c.optimizer = j.at("optimizer");
  c.shape.inputs = j.at("inputs");
  c.shape.hidden = j.at("hidden").get<std::vector<int>>();
  c.shape.classes = j.at("classes");
  c.params.resize(j.at("num_params").get<std::size_t>());
  c.optimizerState.resize(j.at("state_buffers").get<std::size_t>());
  return c;
}

}  // namespace

std::filesystem::path checkpointPath(const std::filesystem::path& dir) { return dir / "checkpoint.bin"; }

void saveCheckpoint(const std::filesystem::path& dir, const Checkpoint& ckpt) {
  std::error_code ec;
  std::filesystem::create_directories(dir, ec);
  if (ec) throw Error("checkpoint: cannot create directory " + dir.string() + ": " + ec.message());
  std::string meta = metadata(ckpt).dump();
  std::string bytes(kMagic, sizeof(kMagic));
  appendU64(bytes, meta.size());
  bytes += meta;
  appendFloats(bytes, ckpt.params);
  for (const auto& buf : ckpt.optimizerState) appendFloats(bytes, buf);
  uint32_t crc = crc32c(bytes.data(), bytes.size());
  for (int i = 0; i < 4; ++i) bytes.push_back(static_cast<char>((crc >> (8 * i)) & 0xff));

  auto final = checkpointPath(dir);
  auto tmp = dir / ("checkpoint.bin.tmp." + std::to_string(::getpid()));
  writeAllAndSync(tmp, bytes);
  std::filesystem::rename(tmp, final, ec);
  if (ec) throw Error("checkpoint: rename to " + final.string() + " failed: " + ec.message());
  int dfd = ::open(dir.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (dfd >= 0) {
    ::fsync(dfd);
    ::close(dfd);
  }
}

std::size_t removeStaleTemporaries(const std::filesystem::path& dir) {
  const std::string prefix = checkpointPath(dir).filename().string() + ".tmp.";
  std::size_t removed = 0;
  std::error_code ec;
  for (auto it = std::filesystem::directory_iterator(dir, ec);
       !ec && it != std::filesystem::directory_iterator(); it.increment(ec)) {
    if (!it->path().filename().string().starts_with(prefix)) continue;
    std::error_code ignored;
    if (std::filesystem::remove(it->path(), ignored)) ++removed;
  }
  return removed;
}

std::optional<Checkpoint> loadCheckpoint(const std::filesystem::path& dir) {
  auto path = checkpointPath(dir);
  std::ifstream in(path, std::ios::binary);
  if (!in) return std::nullopt;
  std::string bytes((std::istreambuf_iterator<char>(in)), {});
  auto bad = [&](const std::string& what) {
    return ConfigError("checkpoint " + path.string() + ": " + what);
  };
  if (bytes.size() < 20 || std::memcmp(bytes.data(), kMagic, 8) != 0) throw bad("not a ddp checkpoint");
  uint32_t stored = 0;
  for (int i = 3; i >= 0; --i) stored = (stored << 8) | static_cast<unsigned char>(bytes[bytes.size() - 4 + i]);
  if (crc32c(bytes.data(), bytes.size() - 4) != stored) throw bad("CRC mismatch (damaged file)");
  uint64_t metaLen = 0;
  for (int i = 7; i >= 0; --i) metaLen = (metaLen << 8) | static_cast<unsigned char>(bytes[8 + i]);
  if (16 + metaLen + 4 > bytes.size()) throw bad("metadata length out of range");
  Checkpoint c;
  try {
    c = fromMetadata(nlohmann::json::parse(bytes.substr(16, metaLen)));
  } catch (const nlohmann::json::exception& e) {
    throw bad(std::string("bad metadata: ") + e.what());
  }
  const std::size_t n = c.params.size();
  if (16 + metaLen + 4 * n * (1 + c.optimizerState.size()) + 4 != bytes.size()) {
    throw bad("size does not match its metadata");
  }
  const char* p = bytes.data() + 16 + metaLen;
  std::memcpy(c.params.data(), p, 4 * n);
  for (auto& buf : c.optimizerState) {
    p += 4 * n;
    buf.resize(n);
    std::memcpy(buf.data(), p, 4 * n);
  }
  return c;
}

}  // namespace ddp
