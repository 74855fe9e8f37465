// HeartbeatLink: the store connection of the rendezvous's heartbeat thread (RoundMonitor).
//
// With a StoreConnector the link owns its connection: it opens one on first use, bounds every call
// on it (setTimeout(budget), connecting included), and after a failure drops it (store errors are
// sticky) and opens a fresh one on the next use. With ConnectionHooks on that connection the
// heartbeat thread may wait on it (interrupt() ends such a wait) and, with ddprun's ON_CLOSE, arm
// "on close" registrations. Without a connector the link uses the agent's own store: no budgets
// are set on it (they would change the agent's), nothing waits on it, no ON_CLOSE.
//
// Thread safety: everything but interrupt() belongs to the heartbeat thread; interrupt() is safe
// from any thread and never blocks.
#pragma once

#include <chrono>
#include <memory>
#include <mutex>

#include "rendezvous/store/connection_hooks.hpp"
#include "rendezvous/algorithm/rendezvous_types.hpp"
#include "rendezvous/store/store.hpp"

namespace ddp::detail {

class HeartbeatLink {
 public:
  HeartbeatLink(Store& shared, StoreConnector connect);

  // The store to call now, every call on it bounded by `budget` (own connection; a missing one is
  // opened first, within `budget`). Throws what the connector throws.
  Store& use(std::chrono::milliseconds budget);
  // A call failed: an own connection is closed, after clearing its ON_CLOSE registrations (this
  // process is alive), and the next use() opens a new one. Blocks up to 200 ms.
  void drop();

  // The link opens connections of its own (their calls have budgets).
  bool ownsConnection() const { return static_cast<bool>(connect_); }
  // An own connection is open now and its waits can be interrupted.
  bool canWait() const { return hooks_ != nullptr; }
  // The open own connection supports ON_CLOSE (ddprund or an embedded StoreServer).
  bool onCloseSupported() const { return hooks_ != nullptr && hooks_->onCloseSupported(); }
  // The hooks of the open own connection; only valid while canWait().
  ConnectionHooks& hooks() { return *hooks_; }
  // After a call ended with TimeoutError: whether the connection is still in step (a wait that
  // timed out and whose CANCEL_WAIT was answered), i.e. the store did answer. The agent's shared
  // store: always true (no wait runs on it).
  bool usable() const { return hooks_ == nullptr || hooks_->usable(); }

  // Ends a wait in progress on the own connection early (latched until a wait consumes it).
  void interrupt();

 private:
  Store& shared_;
  const StoreConnector connect_;
  ConnectionHooks* hooks_ = nullptr;  // of store_, when it has them
  std::mutex mutex_;
  // Guarded by mutex_ (written by the heartbeat thread, read by interrupt()).
  std::unique_ptr<Store> store_;
};

}  // namespace ddp::detail
