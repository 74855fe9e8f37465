// Journal: the durable log of a StoreServer's mutations in its data directory (--data-dir), with
// snapshots that compact it. Byte layout: journal_format.hpp. Files in the directory:
//   LOCK            flock()ed while a daemon uses the directory
//   snapshot.<G>    the whole state at the start of generation G (written as .tmp, then renamed)
//   journal.<G>     the records of generation G, in order
// Replay loads the newest snapshot and the journals of that generation and later; the daemon then
// starts a new generation with a fresh snapshot, so a torn record of the last run is dropped once.
//
// The io thread stages the mutations of a batch of requests and commits them as one record
// (atomic on replay); a writer thread writes records in order and syncs them (FsyncMode); the io
// thread learns on its own executor when records became durable and releases the replies that
// waited for it (whenDurable). Compaction: once the journal outgrew compactAfterBytes and the last
// snapshot, the io thread takes a snapshot (copying keys, sharing values: stored Blobs are never
// changed in place while shared) and the writer writes it and starts the next generation.
//
// Failure to write or sync is fatal: logged and the process exits (kJournalFailedExit), since a
// daemon that cannot persist must not acknowledge writes.
//
// Thread safety: open()/replay()/start() before serving; stage/commit/whenDurable/maybeCompact on
// the io thread only; the writer thread is internal. The destructor drains and joins it.
#pragma once

#include <condition_variable>
#include <cstdint>
#include <deque>
#include <functional>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include <boost/asio/any_io_executor.hpp>

#include "rendezvous/server/detail/journal_format.hpp"
#include "rendezvous/server/detail/memory_budget.hpp"
#include "rendezvous/server/durability.hpp"

namespace spdlog {
class logger;
}

namespace ddp::detail {

inline constexpr int kJournalFailedExit = 3;

// One entry of a snapshot: a Put, QueuePush (value) or RequestId (client, sequence, value).
struct SnapshotItem {
  MutationKind kind = MutationKind::kPut;
  std::string key;
  Blob value;
  uint64_t client = 0;
  uint64_t sequence = 0;
  std::string reply;  // RequestId
};
using SnapshotItems = std::vector<SnapshotItem>;

class Journal {
 public:
  // Creates and locks the directory. Throws ConfigError (one line) when it cannot be created,
  // is locked by another daemon, or cannot be listed.
  Journal(DurabilityOptions options, boost::asio::any_io_executor io,
          std::shared_ptr<spdlog::logger> log);
  ~Journal();
  Journal(const Journal&) = delete;
  Journal& operator=(const Journal&) = delete;

  // Feeds every mutation of the newest snapshot and the journals after it to `apply` (false:
  // it did not fit in the memory budget). Throws ConfigError naming the file on corruption, a
  // foreign format version, or a replay that does not fit. Returns the records replayed.
  uint64_t replay(const std::function<bool(const Mutation&)>& apply);
  // Writes a snapshot of the replayed state as a new generation, drops the older files and
  // starts the writer thread. Throws ConfigError when the directory cannot be written.
  void start(const SnapshotItems& state);

  // io thread: adds `m` to the record being built.
  void stage(const Mutation& m) { encodeMutation(staged_, m); }
  // io thread: ends the record being built (if anything was staged) and hands it to the writer.
  void commit();
  // io thread: true when every committed (and staged) record is durable; otherwise `then` runs on
  // the io executor once the records committed so far, and the one being staged, are.
  bool whenDurable(std::function<void()> then);
  // io thread: whether a snapshot is due; then call compact() with the current state.
  bool compactionDue() const;
  void compact(SnapshotItems state);

  const std::string& directory() const { return options_.dataDir; }
  uint64_t committed() const { return committed_; }
  uint64_t durable() const { return durable_; }

 private:
  struct Item {
    std::string bytes;
    uint64_t sequence = 0;                   // the last record in `bytes`
    std::shared_ptr<SnapshotItems> snapshot;  // a compaction instead of bytes
  };
  void writerLoop();
  void writeGroup(std::deque<Item>& group);
  void rotate(const SnapshotItems& state);
  void published(uint64_t sequence);
  [[noreturn]] void fatal(const std::string& what);

  DurabilityOptions options_;
  boost::asio::any_io_executor io_;
  std::shared_ptr<spdlog::logger> log_;
  int lockFd_ = -1;
  // io thread only
  std::string staged_;
  uint64_t committed_ = 0;
  uint64_t durable_ = 0;
  std::size_t sinceSnapshot_ = 0;
  std::size_t snapshotBytes_ = 0;
  std::deque<std::pair<uint64_t, std::function<void()>>> waiters_;
  std::shared_ptr<bool> alive_ = std::make_shared<bool>(true);
  // writer thread only (after start())
  int journalFd_ = -1;
  uint64_t generation_ = 0;
  // Guarded by mutex_
  std::mutex mutex_;
  std::condition_variable wake_;
  std::deque<Item> queue_;
  bool stopping_ = false;
  std::thread writer_;
};

}  // namespace ddp::detail
