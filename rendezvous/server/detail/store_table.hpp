// StoreTable: the data a StoreServer holds — keys with their values, and the queues (a separate
// namespace, as in torch's libuv server) — every byte of it charged to a MemoryBudget.
//
// Every change to the data goes through put(), append(), erase(), queuePush(), queuePop() and
// clear(): that is the one place where a journal of mutations (durability) hooks in. A mutation
// that the budget cannot hold returns false and changes nothing.
//
// For the status pages the table also keeps, in the same place, an ordered index of the rendezvous
// keys (rdzv/..., rendezvous/store/rendezvous_key_names.hpp), so a snapshot costs O(rendezvous
// keys), not O(keys), and when each heartbeat key last got an ADD (noteHeartbeat(); at most
// kMaxHeartbeatTimes keys, on the server's steady clock). A deleted key leaves both.
//
// Thread safety: none; the server's io_context thread owns the table.
#pragma once

#include <chrono>
#include <cstddef>
#include <deque>
#include <functional>
#include <optional>
#include <set>
#include <string>
#include <string_view>
#include <unordered_map>
#include <utility>

#include "rendezvous/server/detail/journal.hpp"
#include "rendezvous/server/detail/memory_budget.hpp"

namespace ddp::detail {

// Budget estimate of a table entry beside its key bytes (map node, hash bucket, Blob).
inline constexpr std::size_t kTableEntryBytes = 96;
// ... of a queue beside its key (std::deque allocates a 512-byte block up front) ...
inline constexpr std::size_t kQueueBytes = kTableEntryBytes + 640;
// ... and of one queued item beside its value.
inline constexpr std::size_t kQueueItemBytes = 48;
// Most heartbeat keys whose last update time a StoreTable keeps.
inline constexpr std::size_t kMaxHeartbeatTimes = 1 << 16;

class StoreTable {
 public:
  explicit StoreTable(MemoryBudget& budget) : budget_(budget) {}
  StoreTable(const StoreTable&) = delete;
  StoreTable& operator=(const StoreTable&) = delete;

  // The value at `key`, or nullptr. Valid until the next mutation.
  const Blob* find(std::string_view key) const;
  // A key, or a non-empty queue, named `key` exists (CHECK / WAIT; queues count, as in libuv).
  bool exists(std::string_view key) const;
  std::size_t numKeys() const { return values_.size(); }
  // Sum of the key lengths (sizes a LIST_KEYS reply).
  std::size_t keyBytes() const { return keyBytes_; }
  template <typename F>
  void forEachKey(F&& f) const {
    for (const auto& [key, entry] : values_) f(std::string_view(key));
  }
  std::size_t queueLength(std::string_view key) const;
  // Every value, and every queued item (front first), for a snapshot.
  template <typename F>
  void forEachValue(F&& f) const {
    for (const auto& [key, entry] : values_) f(std::string_view(key), entry.value);
  }
  template <typename F>
  void forEachQueued(F&& f) const {
    for (const auto& [key, queue] : queues_) {
      for (const auto& item : queue.items) f(std::string_view(key), item.value);
    }
  }

  // From now on every mutation is staged in `journal` (nullptr: none), as its effect.
  void setJournal(Journal* journal) { journal_ = journal; }

  // Stores `value` at `key` (replacing any value). False when a new entry does not fit.
  bool put(std::string_view key, Blob value);
  // Appends `data` to the value at `key` (creating it). False when it does not fit.
  bool append(std::string_view key, std::string_view data);
  // Removes `key`; whether it existed.
  bool erase(std::string_view key);
  // Appends `value` to the queue `key`. False when it does not fit.
  bool queuePush(std::string_view key, Blob value);
  // Pops the front of queue `key`: its length before the pop and the value; nullopt when empty.
  std::optional<std::pair<std::size_t, Blob>> queuePop(std::string_view key);
  // Drops every key and queue.
  void clear();

  // The rendezvous keys (rdzv/...) present, in name order.
  const std::set<std::string, std::less<>>& rendezvousKeys() const { return rendezvousKeys_; }
  // Remembers now as the last update of heartbeat key `key` (which exists).
  void noteHeartbeat(std::string_view key);
  // When heartbeat key `key` last got an ADD, if it did since the server started.
  std::optional<std::chrono::steady_clock::time_point> heartbeatTime(std::string_view key) const;

 private:
  struct Hash {
    using is_transparent = void;
    std::size_t operator()(std::string_view s) const { return std::hash<std::string_view>{}(s); }
  };
  template <typename V>
  using Map = std::unordered_map<std::string, V, Hash, std::equal_to<>>;

  struct Entry {
    Blob value;
    Charge charge;  // key + bookkeeping
  };
  struct QueueItem {
    Blob value;
    Charge charge;
  };
  struct Queue {
    std::deque<QueueItem> items;  // never empty: a queue popped empty is erased
    Charge charge;
  };

  void journal(MutationKind kind, std::string_view key, std::string_view value = {}) {
    if (journal_ != nullptr) journal_->stage(Mutation{kind, key, value, 0, 0});
  }

  MemoryBudget& budget_;
  Journal* journal_ = nullptr;
  Map<Entry> values_;
  Map<Queue> queues_;
  std::size_t keyBytes_ = 0;
  std::set<std::string, std::less<>> rendezvousKeys_;
  Map<std::chrono::steady_clock::time_point> heartbeatTimes_;
};

}  // namespace ddp::detail
