#include "rendezvous/algorithm/detail/heartbeat_link.hpp"

#include <utility>

namespace ddp::detail {

namespace {

// How long a healthy connection that is given up gets to clear its ON_CLOSE registrations.
constexpr std::chrono::milliseconds kClearBudget{200};

}  // namespace

HeartbeatLink::HeartbeatLink(Store& shared, StoreConnector connect)
    : shared_(shared), connect_(std::move(connect)) {}

Store& HeartbeatLink::use(std::chrono::milliseconds budget) {
  if (!connect_) return shared_;
  if (!store_) {
    auto fresh = connect_(budget);
    ConnectionHooks* hooks = dynamic_cast<ConnectionHooks*>(fresh.get());
    std::lock_guard<std::mutex> lock(mutex_);
    store_ = std::move(fresh);
    hooks_ = hooks;
  }
  store_->setTimeout(budget);
  return *store_;
}

void HeartbeatLink::drop() {
  if (onCloseSupported()) {
    // A live process gives this connection up: its registrations must not fire. A client that
    // already failed sent ON_CLOSE_CLEAR as it closed, and throws here at once.
    try {
      store_->setTimeout(kClearBudget);
      hooks_->clearOnClose({});
    } catch (const std::exception&) {
    }
  }
  std::unique_ptr<Store> old;
  {
    std::lock_guard<std::mutex> lock(mutex_);
    old = std::move(store_);
    hooks_ = nullptr;
  }
  // Destroyed outside the lock: closing may write a farewell.
}

void HeartbeatLink::interrupt() {
  std::lock_guard<std::mutex> lock(mutex_);
  if (store_ == nullptr) return;
  if (auto* hooks = dynamic_cast<ConnectionHooks*>(store_.get())) hooks->interruptWait();
}

}  // namespace ddp::detail
