// WaitRegistry: which connections wait for which keys (WAIT, BARRIER), with every operation
// O(1) per registration, and ServerConnection, a connection as the store sees it.
//
// A connection holds at most one registration per key; a key listed again (in the same WAIT, or
// by an earlier WAIT still registered) raises the registration's count instead. Counting keeps
// the legacy server's semantics exactly: each creation of a key counts the connection's awaited
// number down by the registration's count, and the connection is woken when that crosses zero
// (upstream keeps one entry per listed key; a key listed k times counts down k). So a WAIT that
// lists one key 131,072 times costs one registration, not 131,072.
//
// Registrations live in two intrusive views: per key, in registration order (wakeOne() wakes in
// that order), and per client (unpark() drops them all). Each is charged to the MemoryBudget.
//
// Thread safety: none; the server's io_context thread owns the registry and its clients.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

#include "rendezvous/server/detail/memory_budget.hpp"

namespace ddp::detail {

class ServerConnection;
struct KeyWaiters;

// One client's registration under one key.
struct WaitNode {
  ServerConnection* client = nullptr;
  KeyWaiters* key = nullptr;
  WaitNode* prev = nullptr;
  WaitNode* next = nullptr;
  int64_t count = 0;  // how many times the key was listed
  Charge charge;
};

// The registrations under one key, oldest first.
struct KeyWaiters {
  const std::string* key = nullptr;  // the map's own key string
  WaitNode* head = nullptr;
  WaitNode* tail = nullptr;
  Charge charge;
};

// One ON_CLOSE registration: COMPARE_SET key expected desired when the connection closes.
struct OnCloseAction {
  std::string key;
  std::string expected;
  std::string desired;
};

// One client's connection as the store server sees it (the server side of a session, not a
// client library): it can be parked in WAIT / BARRIER and woken, and it may hold ON_CLOSE
// registrations. SessionProtocol is the real one; tests fake it.
class ServerConnection {
 public:
  virtual ~ServerConnection() = default;

 protected:
  // The connection's wait completed: it must send STOP_WAITING (00). Called on the owning
  // thread, possibly while this client's own request is being applied.
  virtual void onWaitComplete() = 0;

 private:
  friend class WaitRegistry;
  friend class StoreState;
  // Listed keys still awaited (signed: the legacy server lets stale registrations drive it < 0).
  int64_t awaited_ = 0;
  std::unordered_map<const KeyWaiters*, WaitNode> waits_;
  // ON_CLOSE registrations in registration order, and what they are charged.
  std::vector<OnCloseAction> onClose_;
  std::vector<Charge> onCloseCharges_;
};

class WaitRegistry {
 public:
  explicit WaitRegistry(MemoryBudget& budget) : budget_(budget) {}
  WaitRegistry(const WaitRegistry&) = delete;
  WaitRegistry& operator=(const WaitRegistry&) = delete;
  ~WaitRegistry();

  // Registers `client` under `key` `count` more times. False (nothing registered) when the
  // budget cannot hold a new registration.
  bool park(ServerConnection& client, std::string_view key, int64_t count);
  // `key` was created: every registration under it counts its client down and is consumed.
  // Appends the clients whose count reached zero, in registration order.
  void wakeAll(std::string_view key, std::vector<ServerConnection*>& woken);
  // QUEUE_PUSH rule: registrations under `key` are consumed in order until one client's count
  // reaches zero; returns that client (or nullptr).
  ServerConnection* wakeOne(std::string_view key);
  // Drops every registration of `client` and zeroes its count (CANCEL_WAIT, disconnect).
  void unpark(ServerConnection& client);

  bool empty() const { return keys_.empty(); }
  // Registrations held by `client` (one per key).
  static std::size_t registrationsOf(const ServerConnection& client) {
    return client.waits_.size();
  }

 private:
  struct Hash {
    using is_transparent = void;
    std::size_t operator()(std::string_view s) const { return std::hash<std::string_view>{}(s); }
  };
  using KeyMap = std::unordered_map<std::string, KeyWaiters, Hash, std::equal_to<>>;

  // Unlinks `node` from its key's list and drops the key's entry once it is empty.
  void unlink(WaitNode& node);
  // Counts `node`'s client down by its count; true when that crossed zero.
  static bool countDown(const WaitNode& node);

  MemoryBudget& budget_;
  KeyMap keys_;
};

// Budget estimate of one registration / one key entry (map node, hash bucket, list links).
inline constexpr std::size_t kWaitNodeBytes = 96;
inline constexpr std::size_t kKeyEntryBytes = 96;

}  // namespace ddp::detail
