// StoreState: the key-value map, the queues and the waiter lists of a StoreServer, with the
// request semantics of shared/reference/tcpstore_protocol.md §3. No I/O: requests come in as
// decoded wire::Request values and replies are appended to the caller's output buffer.
//
// Deliberate choices (the "improvements" the reference recommends):
//   * GET / MULTI_GET of a missing key reply an empty value (torch 1.13 closes the connection).
//   * COMPARE_SET that stores a value wakes waiters of the key (torch 1.13 does not).
//   * WATCH_KEY is answered with 03 but no change events are ever pushed.
// Everything else follows the legacy server byte for byte, including its WAIT bookkeeping: a WAIT
// overwrites the connection's awaited count, duplicate keys are counted twice, and a wait that a
// 1.13 client gave up on stays registered (its late 00 reaches the client, as upstream).
//
// ddprun's extension (wire_codec.hpp): HELLO is answered with kCapOnClose; ON_CLOSE registrations
// are kept per client (at most kMaxOnClosePerClient; one per key, a new one replaces the old) and
// applied as COMPARE_SETs, in registration order, by disconnect(client, true).
//
// For the status pages it also keeps the names of the rendezvous keys (rdzv/..., an ordered index
// maintained when such a key is created or deleted, so a snapshot costs O(rendezvous keys), not
// O(keys)) and remembers, on its own steady clock, when each heartbeat key
// (rendezvous/store/rendezvous_key_names.hpp) last got an ADD — at most kMaxHeartbeatTimes keys;
// a deleted key is forgotten.
//
// Thread safety: none; one thread (the server's io_context) owns a StoreState and its clients.
#pragma once

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <deque>
#include <optional>
#include <set>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

#include "rendezvous/server/store_stats.hpp"
#include "rendezvous/wire/wire_codec.hpp"

namespace ddp::detail {

// Most heartbeat keys whose last update time a StoreState keeps.
inline constexpr std::size_t kMaxHeartbeatTimes = 1 << 16;

// Most ON_CLOSE registrations one connection may hold; more are refused (reply -1).
inline constexpr std::size_t kMaxOnClosePerClient = 16;

// One ON_CLOSE registration: COMPARE_SET key expected desired when the connection closes.
struct OnCloseAction {
  std::string key;
  std::string expected;
  std::string desired;
};

// What disconnect() applied: the registration, and whether its COMPARE_SET stored `desired`.
struct AppliedOnClose {
  OnCloseAction action;
  bool swapped = false;
};

// A connection as the store sees it: something that can be parked in WAIT / BARRIER and woken,
// and that may hold ON_CLOSE registrations.
class StoreClient {
 public:
  virtual ~StoreClient() = default;

 protected:
  // The connection's wait completed: it must send STOP_WAITING (00). Called on the owning
  // thread, possibly while this client's own request is being applied.
  virtual void onWaitComplete() = 0;

 private:
  friend class StoreState;
  // Missing keys still awaited (signed: the legacy server lets stale registrations drive it <0).
  int64_t awaited_ = 0;
  // Keys this client is registered under, with multiplicity.
  std::vector<std::string> waitKeys_;
  // ON_CLOSE registrations, in registration order.
  std::vector<OnCloseAction> onClose_;
};

class StoreState {
 public:
  // Applies `request` for `client`, appending its reply (if any) to `out`. Returns false when the
  // connection must be closed (ADD or BARRIER on a non-numeric value); `reason` then says why.
  bool apply(const wire::Request& request, StoreClient& client, std::string& out,
             std::string& reason);

  // Drops every wait registration of `client` (connection closed). The data stays. With
  // `applyOnClose` (the peer closed or the connection broke; not when the server stops) its
  // ON_CLOSE registrations are applied as COMPARE_SETs first, waking waiters; returns them.
  std::vector<AppliedOnClose> disconnect(StoreClient& client, bool applyOnClose);

  std::size_t numKeys() const { return kv_.size(); }

  // Stores `value` at `key` before any client is served (StoreServerOptions::initialKeys).
  void preset(std::string_view key, std::string_view value) { put(key, value); }

  // Fills out.keys, and out.entries with the rendezvous keys (rdzv/...) and their values, in
  // name order, until `budget` bytes were copied (then out.truncated), with their heartbeat
  // times. O(rendezvous keys).
  void snapshot(std::size_t budget, StoreSnapshot& out) const;

 private:
  struct Hash {
    using is_transparent = void;
    std::size_t operator()(std::string_view s) const { return std::hash<std::string_view>{}(s); }
  };
  template <typename V>
  using Map = std::unordered_map<std::string, V, Hash, std::equal_to<>>;

  bool exists(std::string_view key) const;
  void put(std::string_view key, std::string_view value);
  void wakeAll(std::string_view key);
  void wakeOne(std::string_view key);
  void park(StoreClient& client, std::string_view key);
  void unpark(StoreClient& client);

  void setValue(std::string_view key, std::string_view value);
  void getValue(std::string_view key, std::string& out) const;
  void check(const wire::Request& r, std::string& out) const;
  void deleteKey(std::string_view key, std::string& out);
  void append(std::string_view key, std::string_view data);
  void queuePush(std::string_view key, std::string_view value);
  void queueLen(std::string_view key, std::string& out) const;
  void compareSet(const wire::Request& r, std::string& out);
  bool add(const wire::Request& r, std::string& out, std::string& reason);
  void wait(const wire::Request& r, StoreClient& client, std::string& out);
  bool barrier(const wire::Request& r, StoreClient& client, std::string& out,
               std::string& reason);
  void queuePop(const wire::Request& r, std::string& out);
  void listKeys(std::string& out) const;
  void hello(std::string& out) const;
  void onClose(const wire::Request& r, StoreClient& client, std::string& out) const;
  void onCloseClear(const wire::Request& r, StoreClient& client, std::string& out) const;

  void noteHeartbeat(std::string_view key);
  void noteRendezvousKey(std::string_view key);
  void forgetRendezvousKey(std::string_view key);

  Map<std::string> kv_;
  Map<std::deque<std::string>> queues_;  // never empty deques: popped-empty queues are erased
  Map<std::vector<StoreClient*>> waiters_;
  Map<std::chrono::steady_clock::time_point> heartbeatTimes_;
  std::set<std::string, std::less<>> rendezvousKeys_;
};

// std::stoll as the legacy server applies it to stored values: leading whitespace, an optional
// sign, then at least one digit; trailing bytes are ignored. nullopt when it would throw.
std::optional<int64_t> parseLegacyInt(std::string_view text);

}  // namespace ddp::detail
