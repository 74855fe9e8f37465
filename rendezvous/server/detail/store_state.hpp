// StoreState: the request semantics of a StoreServer (c10d's TCPStore's; docs/ddprund.md)
// over its data (StoreTable) and its waiters (WaitRegistry). No I/O: requests come in as decoded
// wire::Request values and replies are appended to the caller's OutputQueue.
//
// Deliberate choices (the "improvements" the reference recommends):
//   * GET / MULTI_GET of a missing key reply an empty value (torch 1.13 closes the connection).
//   * COMPARE_SET that stores a value wakes waiters of the key (torch 1.13 does not).
//   * WATCH_KEY is answered with 03 but no change events are ever pushed.
// BARRIER follows torch's libuv server (the only one that has it): the counter goes up by one; at
// world_size the caller is answered and the key's waiters woken, below it the caller waits as a
// one-key WAIT does, so the next change of the key releases it (docs/ddprund.md "BARRIER").
// Everything else follows the legacy server byte for byte, including its WAIT bookkeeping: a WAIT
// overwrites the connection's awaited count, duplicate keys are counted twice, and a wait that a
// 1.13 client gave up on stays registered (its late 00 reaches the client, as upstream). Duplicate
// keys cost one registration each (see wait_registry.hpp), so a request's work is O(its keys).
//
// Bounded: every byte a request makes the server keep is charged to the MemoryBudget first. A
// request the budget cannot hold is refused whole (nothing of it applied) and the connection
// closed with a reason, as is an ADD or BARRIER whose result would overflow int64 (upstream: UB).
//
// ddprun's extension (wire_codec.hpp): HELLO is answered with kCapOnClose; ON_CLOSE registrations
// are kept per client (at most kMaxOnClosePerClient; one per key, a new one replaces the old) and
// applied as COMPARE_SETs, in registration order, by disconnect(client, true).
//
// For the status pages, snapshot() copies the rendezvous keys from the table's index of them, with
// when each heartbeat key (rendezvous/store/rendezvous_key_names.hpp) last got an ADD.
//
// Thread safety: none; one thread (the server's io_context) owns a StoreState and its clients.
#pragma once

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "rendezvous/server/detail/memory_budget.hpp"
#include "rendezvous/server/detail/journal.hpp"
#include "rendezvous/server/detail/output_queue.hpp"
#include "rendezvous/server/detail/request_ids.hpp"
#include "rendezvous/server/detail/store_table.hpp"
#include "rendezvous/server/detail/wait_registry.hpp"
#include "rendezvous/server/store_stats.hpp"
#include "rendezvous/wire/wire_codec.hpp"

namespace ddp::detail {

// Most ON_CLOSE registrations one connection may hold; more are refused (reply -1).
inline constexpr std::size_t kMaxOnClosePerClient = 16;

// Values at least this long, received in a buffer sized for their request, are stored by
// reference to that buffer instead of being copied (see apply()).
inline constexpr std::size_t kKeepBufferAbove = 64 * 1024;

// What disconnect() applied: the registration, and whether its COMPARE_SET stored `desired`.
struct AppliedOnClose {
  OnCloseAction action;
  bool swapped = false;
  bool refused = false;  // the memory budget could not hold `desired`
};

class StoreState {
 public:
  explicit StoreState(MemoryBudget& budget)
      : budget_(budget), table_(budget), waits_(budget), requestIds_(budget),
        instance_(newInstanceId()) {}
  StoreState(const StoreState&) = delete;
  StoreState& operator=(const StoreState&) = delete;

  // Applies `request` for `client`, appending its reply (if any) to `out`. Returns false when the
  // connection must be closed (ADD/BARRIER on a non-numeric value or past int64, a request the
  // memory budget cannot hold); `reason` then says why and nothing of the request was applied.
  // `buffer`, when given, holds the request's bytes: a large value that fills most of it is kept
  // by reference (the caller must then not write into that buffer again).
  bool apply(const wire::Request& request, ServerConnection& client, OutputQueue& out,
             std::string& reason, const Blob* buffer = nullptr);

  // Drops every wait registration of `client` (connection closed). The data stays. With
  // `applyOnClose` (the peer closed or the connection broke; not when the server stops) its
  // ON_CLOSE registrations are applied as COMPARE_SETs first, waking waiters; returns them.
  std::vector<AppliedOnClose> disconnect(ServerConnection& client, bool applyOnClose);

  std::size_t numKeys() const { return table_.numKeys(); }
  // Whether the last apply() that returned false was refused by the memory budget (rather than
  // for bad input).
  bool refusedForMemory() const { return refusedForMemory_; }
  MemoryBudget& budget() { return budget_; }

  // Drops every key and queue (the budget then holds only what clients still hold). Every client
  // must have been disconnected first.
  void clear() {
    table_.clear();
    requestIds_.clear();
  }

  // ---- Durability and retries (store_state_durable.cpp) ----
  // apply() of a request tagged by REQUEST_ID (client, sequence): one already applied is answered
  // with its kept reply instead; a new one is applied and its reply kept (and journaled).
  bool applyTagged(const wire::Request& request, uint64_t clientId, uint64_t sequence,
                   ServerConnection& client, OutputQueue& out, std::string& reason,
                   const Blob* buffer = nullptr);
  // From now on every change is staged in `journal` (the caller commits).
  void attachJournal(Journal* journal);
  // Applies one replayed mutation (no waiters exist yet); false when the budget cannot hold it.
  bool replay(const Mutation& m);
  // The whole state, values shared (not copied), for a snapshot.
  SnapshotItems snapshot() const;
  std::size_t requestIds() const { return requestIds_.size(); }

  // Stores `value` at `key` before any client is served (StoreServerOptions::initialKeys).
  // False when the budget cannot hold it.
  bool preset(std::string_view key, std::string_view value);

  // Fills out.keys, and out.entries with the rendezvous keys (rdzv/...) and their values, in
  // name order, until `budget` bytes were copied (then out.truncated), with their heartbeat
  // times. O(rendezvous keys).
  void snapshot(std::size_t budget, StoreSnapshot& out) const;

 private:
  std::optional<Blob> makeValue(std::string_view bytes, const Blob* buffer);
  bool refuse(std::string& reason, std::string_view what, std::size_t bytes);
  void wakeAll(std::string_view key);

  bool setValue(const wire::Request& r, const Blob* buffer, std::string& reason);
  bool getValue(std::string_view key, OutputQueue& out, std::string& reason);
  bool multiGet(const wire::Request& r, OutputQueue& out, std::string& reason);
  bool multiSet(const wire::Request& r, const Blob* buffer, std::string& reason);
  void check(const wire::Request& r, OutputQueue& out) const;
  bool append(const wire::Request& r, std::string& reason);
  bool compareSet(std::string_view key, std::string_view expected, std::string_view desired,
                  const Blob* buffer, OutputQueue* out, std::string& reason);
  bool add(const wire::Request& r, OutputQueue& out, std::string& reason);
  bool wait(const wire::Request& r, ServerConnection& client, OutputQueue& out,
            std::string& reason);
  bool barrier(const wire::Request& r, ServerConnection& client, OutputQueue& out,
               std::string& reason);
  bool queuePush(const wire::Request& r, const Blob* buffer, std::string& reason);
  bool queuePop(std::string_view key, OutputQueue& out, std::string& reason);
  bool listKeys(OutputQueue& out, std::string& reason);
  bool storeNumber(std::string_view key, int64_t value, std::string& reason);
  // ddprun's extension (store_state_extension.cpp).
  void hello(OutputQueue& out) const;
  bool onClose(const wire::Request& r, ServerConnection& client, OutputQueue& out,
               std::string& reason);
  void onCloseClear(const wire::Request& r, ServerConnection& client, OutputQueue& out) const;

  MemoryBudget& budget_;
  StoreTable table_;
  WaitRegistry waits_;
  RequestIds requestIds_;
  Journal* journal_ = nullptr;
  // Told to every client in HELLO ("instance"): a client that reconnects to a store keeping no
  // data sees whether it is still the same one.
  std::string instance_;
  static std::string newInstanceId();
  std::vector<ServerConnection*> woken_;  // scratch of wakeAll()
  bool refusedForMemory_ = false;
};

// std::stoll as the legacy server applies it to stored values: leading whitespace, an optional
// sign, then at least one digit; trailing bytes are ignored. nullopt when it would throw.
std::optional<int64_t> parseLegacyInt(std::string_view text);

}  // namespace ddp::detail
