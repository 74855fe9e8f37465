#include "rendezvous/server/detail/journal.hpp"

#include <unistd.h>

#include <cerrno>
#include <cstdlib>
#include <cstring>

#include <boost/asio/post.hpp>
#include <spdlog/logger.h>

namespace ddp::detail {

void Journal::commit() {
  if (staged_.empty()) return;
  std::string record;
  encodeRecord(record, staged_);
  staged_.clear();
  if (staged_.capacity() > 4096) std::string().swap(staged_);
  const uint64_t sequence = ++committed_;
  sinceSnapshot_ += record.size();
  {
    std::lock_guard<std::mutex> lock(mutex_);
    // Batch and off coalesce what piles up while the writer is busy (group commit); always keeps
    // one item (one sync) per record.
    if (options_.fsync != FsyncMode::kAlways && !queue_.empty() && !queue_.back().snapshot) {
      queue_.back().bytes += record;
      queue_.back().sequence = sequence;
    } else {
      queue_.push_back(Item{std::move(record), sequence, nullptr});
    }
  }
  wake_.notify_one();
}

bool Journal::whenDurable(std::function<void()> then) {
  // A change staged but not yet committed (a SET that woke a WAIT, in the middle of the batch
  // that holds it) will be the next record: the reply it revealed waits for that one too.
  const uint64_t needed = committed_ + (staged_.empty() ? 0 : 1);
  if (durable_ >= needed) return true;
  waiters_.emplace_back(needed, std::move(then));
  return false;
}

bool Journal::compactionDue() const {
  return sinceSnapshot_ > options_.compactAfterBytes && sinceSnapshot_ > snapshotBytes_;
}

void Journal::compact(SnapshotItems state) {
  commit();
  std::size_t bytes = 0;
  for (const auto& item : state) bytes += item.key.size() + item.value.size() + 32;
  snapshotBytes_ = bytes;
  sinceSnapshot_ = 0;
  {
    std::lock_guard<std::mutex> lock(mutex_);
    queue_.push_back(Item{{}, committed_, std::make_shared<SnapshotItems>(std::move(state))});
  }
  wake_.notify_one();
}

void Journal::published(uint64_t sequence) {
  if (sequence <= durable_) return;
  durable_ = sequence;
  while (!waiters_.empty() && waiters_.front().first <= durable_) {
    auto then = std::move(waiters_.front().second);
    waiters_.pop_front();
    then();
  }
}

void Journal::writerLoop() {
  std::unique_lock<std::mutex> lock(mutex_);
  for (;;) {
    wake_.wait(lock, [&] { return stopping_ || !queue_.empty(); });
    if (queue_.empty()) return;  // stopping, and everything is written
    std::deque<Item> group;
    group.swap(queue_);
    lock.unlock();
    writeGroup(group);
    lock.lock();
  }
}

void Journal::writeGroup(std::deque<Item>& group) {
  uint64_t written = 0;
  bool unsynced = false;
  for (auto& item : group) {
    if (item.snapshot) {
      try {
        rotate(*item.snapshot);  // syncs the old journal first
      } catch (const std::exception& e) {
        fatal(std::string("writing a snapshot: ") + e.what());
      }
      unsynced = false;
      continue;
    }
    const char* p = item.bytes.data();
    std::size_t left = item.bytes.size();
    while (left > 0) {
      const ssize_t n = ::write(journalFd_, p, left);
      if (n < 0 && errno == EINTR) continue;
      if (n < 0) fatal("writing " + options_.dataDir + "/journal." + std::to_string(generation_) +
                       ": " + std::strerror(errno));
      p += n;
      left -= static_cast<std::size_t>(n);
    }
    written = item.sequence;
    unsynced = true;
    if (options_.fsync == FsyncMode::kAlways && ::fdatasync(journalFd_) != 0) {
      fatal(std::string("syncing the journal: ") + std::strerror(errno));
    }
  }
  if (unsynced && options_.fsync == FsyncMode::kBatch && ::fdatasync(journalFd_) != 0) {
    fatal("syncing " + options_.dataDir + "/journal." + std::to_string(generation_) + ": " +
          std::strerror(errno));
  }
  const uint64_t sequence = group.empty() ? written : group.back().sequence;
  boost::asio::post(io_, [this, alive = std::weak_ptr<bool>(alive_), sequence] {
    if (alive.lock()) published(sequence);
  });
}

void Journal::fatal(const std::string& what) {
  log_->critical("{}; the daemon exits rather than acknowledge writes it cannot keep", what);
  log_->flush();
  std::_Exit(kJournalFailedExit);
}

Journal::~Journal() {
  {
    std::lock_guard<std::mutex> lock(mutex_);
    stopping_ = true;
  }
  wake_.notify_one();
  if (writer_.joinable()) writer_.join();
  alive_.reset();
  if (journalFd_ >= 0) ::close(journalFd_);
  if (lockFd_ >= 0) ::close(lockFd_);
}

}  // namespace ddp::detail
