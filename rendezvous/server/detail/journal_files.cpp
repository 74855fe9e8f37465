// The directory side of Journal: locking, listing, replay, snapshots and new generations.
#include <fcntl.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <set>
#include <thread>

#include <spdlog/logger.h>

#include "rendezvous/base/error.hpp"
#include "rendezvous/server/detail/journal.hpp"

namespace ddp::detail {
namespace fs = std::filesystem;

namespace {

struct Generations {
  std::set<uint64_t> snapshots;
  std::set<uint64_t> journals;
};

std::string errnoText() { return std::strerror(errno); }

std::optional<uint64_t> suffix(const std::string& name, const std::string& prefix) {
  if (name.rfind(prefix, 0) != 0 || name.size() == prefix.size()) return std::nullopt;
  const std::string digits = name.substr(prefix.size());
  if (!std::all_of(digits.begin(), digits.end(), ::isdigit) || digits.size() > 18) {
    return std::nullopt;
  }
  return std::stoull(digits);
}

Generations listGenerations(const std::string& dir) {
  Generations found;
  std::error_code ec;
  for (const auto& entry : fs::directory_iterator(dir, ec)) {
    const std::string name = entry.path().filename().string();
    if (auto g = suffix(name, "snapshot.")) found.snapshots.insert(*g);
    if (auto g = suffix(name, "journal.")) found.journals.insert(*g);
  }
  if (ec) throw ConfigError("cannot list the data directory " + dir + ": " + ec.message());
  return found;
}

std::string readWhole(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  std::string bytes((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  if (in.bad()) throw ConfigError("cannot read " + path);
  return bytes;
}

void writeAll(int fd, std::string_view bytes, const std::string& path) {
  while (!bytes.empty()) {
    const ssize_t n = ::write(fd, bytes.data(), bytes.size());
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) throw ConfigError("cannot write " + path + ": " + errnoText());
    bytes.remove_prefix(static_cast<std::size_t>(n));
  }
}

void syncDirectory(const std::string& dir) {
  const int fd = ::open(dir.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (fd < 0 || ::fsync(fd) != 0) {
    if (fd >= 0) ::close(fd);
    throw ConfigError("cannot sync the data directory " + dir + ": " + errnoText());
  }
  ::close(fd);
}

std::string pathOf(const std::string& dir, const char* kind, uint64_t generation) {
  return dir + "/" + kind + "." + std::to_string(generation);
}

// Writes snapshot.<generation> (via a .tmp file, synced, renamed, directory synced).
std::size_t writeSnapshot(const std::string& dir, uint64_t generation,
                          const SnapshotItems& items) {
  const std::string path = pathOf(dir, "snapshot", generation);
  const std::string tmp = path + ".tmp";
  const int fd = ::open(tmp.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
  if (fd < 0) throw ConfigError("cannot create " + tmp + ": " + errnoText());
  std::string chunk;
  encodeFileHeader(chunk, FileKind::kSnapshot, generation);
  std::size_t total = 0;
  std::string payload;
  auto record = [&](const Mutation& m) {
    payload.clear();
    encodeMutation(payload, m);
    encodeRecord(chunk, payload);
    if (chunk.size() >= (1u << 20)) {
      writeAll(fd, chunk, tmp);
      total += chunk.size();
      chunk.clear();
    }
  };
  for (const auto& item : items) {
    const std::string_view value =
        item.kind == MutationKind::kRequestId ? std::string_view(item.reply) : item.value.view();
    record(Mutation{item.kind, item.key, value, item.client, item.sequence});
  }
  record(Mutation{MutationKind::kEnd, {}, {}, items.size(), 0});
  writeAll(fd, chunk, tmp);
  total += chunk.size();
  const bool synced = ::fsync(fd) == 0;
  ::close(fd);
  if (!synced || std::rename(tmp.c_str(), path.c_str()) != 0) {
    throw ConfigError("cannot write " + path + ": " + errnoText());
  }
  syncDirectory(dir);
  return total;
}

// Feeds the records of one file to `apply`; returns the records seen.
uint64_t replayFile(const std::string& path, FileKind kind, bool last,
                    const std::function<bool(const Mutation&)>& apply,
                    const std::shared_ptr<spdlog::logger>& log) {
  const std::string bytes = readWhole(path);
  std::string error;
  if (!decodeFileHeader(bytes, kind, error)) throw ConfigError(path + ": " + error);
  const auto scan = scanRecords(std::string_view(bytes).substr(kFileHeaderBytes));
  if (!scan.error.empty()) throw ConfigError(path + " is corrupt: " + scan.error);
  if (scan.torn && (kind == FileKind::kSnapshot || !last)) {
    throw ConfigError(path + " is corrupt: its last record is cut short");
  }
  if (scan.torn) {
    log->warn("{}: dropped a torn last record at byte {} (the daemon stopped while writing it)",
              path, kFileHeaderBytes + scan.validBytes);
  }
  bool ended = false;
  std::vector<Mutation> mutations;
  for (const auto payload : scan.payloads) {
    mutations.clear();
    if (!decodeMutations(payload, mutations, error)) throw ConfigError(path + ": " + error);
    for (const auto& m : mutations) {
      if (m.kind == MutationKind::kEnd) {
        ended = true;
      } else if (!apply(m)) {
        throw ConfigError("the data in " + path +
                          " does not fit in the memory budget (raise --max-memory)");
      }
    }
  }
  if (kind == FileKind::kSnapshot && !ended) {
    throw ConfigError(path + " is corrupt: it has no end record");
  }
  return scan.payloads.size();
}

}  // namespace

Journal::Journal(DurabilityOptions options, boost::asio::any_io_executor io,
                 std::shared_ptr<spdlog::logger> log)
    : options_(std::move(options)), io_(std::move(io)), log_(std::move(log)) {
  std::error_code ec;
  fs::create_directories(options_.dataDir, ec);
  if (ec) {
    throw ConfigError("cannot create the data directory " + options_.dataDir + ": " +
                      ec.message());
  }
  const std::string lockPath = options_.dataDir + "/LOCK";
  lockFd_ = ::open(lockPath.c_str(), O_RDWR | O_CREAT | O_CLOEXEC, 0600);
  if (lockFd_ < 0) throw ConfigError("cannot open " + lockPath + ": " + errnoText());
  if (::flock(lockFd_, LOCK_EX | LOCK_NB) != 0) {
    ::close(lockFd_);
    lockFd_ = -1;
    throw ConfigError("the data directory " + options_.dataDir +
                      " is in use by another ddprund (" + lockPath + " is locked)");
  }
}

uint64_t Journal::replay(const std::function<bool(const Mutation&)>& apply) {
  const auto found = listGenerations(options_.dataDir);
  const uint64_t base = found.snapshots.empty() ? 0 : *found.snapshots.rbegin();
  uint64_t records = 0;
  if (!found.snapshots.empty()) {
    records += replayFile(pathOf(options_.dataDir, "snapshot", base), FileKind::kSnapshot, false,
                          apply, log_);
  }
  for (auto it = found.journals.lower_bound(base); it != found.journals.end(); ++it) {
    const bool last = std::next(it) == found.journals.end();
    records += replayFile(pathOf(options_.dataDir, "journal", *it), FileKind::kJournal, last,
                          apply, log_);
  }
  const uint64_t newest = std::max(found.snapshots.empty() ? 0 : *found.snapshots.rbegin(),
                                   found.journals.empty() ? 0 : *found.journals.rbegin());
  generation_ = newest;  // start() begins the next one
  return records;
}

void Journal::start(const SnapshotItems& state) {
  rotate(state);
  writer_ = std::thread([this] { writerLoop(); });
}

// Starts generation G+1: its journal first (so records after the snapshot have a home), then its
// snapshot; the older files go once the snapshot is durable. Called by start() and the writer.
void Journal::rotate(const SnapshotItems& state) {
  if (journalFd_ >= 0) {
    if (::fdatasync(journalFd_) != 0) {
      throw ConfigError("cannot sync the journal before a snapshot: " + errnoText());
    }
    ::close(journalFd_);
  }
  const uint64_t next = generation_ + 1;
  const std::string path = pathOf(options_.dataDir, "journal", next);
  journalFd_ = ::open(path.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_APPEND | O_CLOEXEC, 0600);
  if (journalFd_ < 0) throw ConfigError("cannot create " + path + ": " + errnoText());
  std::string header;
  encodeFileHeader(header, FileKind::kJournal, next);
  writeAll(journalFd_, header, path);
  if (::fdatasync(journalFd_) != 0) throw ConfigError("cannot sync " + path + ": " + errnoText());
  writeSnapshot(options_.dataDir, next, state);
  generation_ = next;
  const auto found = listGenerations(options_.dataDir);
  for (const uint64_t g : found.snapshots) {
    if (g < next) fs::remove(pathOf(options_.dataDir, "snapshot", g));
  }
  for (const uint64_t g : found.journals) {
    if (g < next) fs::remove(pathOf(options_.dataDir, "journal", g));
  }
}

}  // namespace ddp::detail
