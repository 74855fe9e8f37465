#include "worker_runtime/detail/superseded_store.hpp"

#include <algorithm>

#include "rendezvous/base/error.hpp"

namespace ddp::detail {

SupersededStore::SupersededStore(Store& inner, const QuorumBoardReader* board, uint32_t epoch,
                                 std::function<void()> probe)
    : inner_(inner), board_(board), epoch_(epoch), probe_(std::move(probe)),
      nextProbe_(Clock::now() + kProbeInterval) {}

std::string SupersededStore::get(const std::string& k) {
  wait({k}, inner_.timeout());
  return inner_.get(k);
}

std::vector<std::string> SupersededStore::multiGet(const std::vector<std::string>& keys) {
  wait(keys, inner_.timeout());
  return inner_.multiGet(keys);
}

void SupersededStore::wait(const std::vector<std::string>& keys, std::chrono::milliseconds timeout) {
  const auto deadline = Clock::now() + timeout;
  while (true) {
    if (board_ != nullptr && board_->epoch() != epoch_) {
      throw CommError("a newer quorum was published while this one was being built");
    }
    if (probe_ && Clock::now() >= nextProbe_) {
      probe_();
      nextProbe_ = Clock::now() + kProbeInterval;
    }
    const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(deadline - Clock::now());
    if (left.count() <= 0) return inner_.wait(keys, std::chrono::milliseconds(1));
    try {
      return inner_.wait(keys, std::min(left, std::chrono::milliseconds(20)));
    } catch (const TimeoutError&) {
      if (Clock::now() >= deadline) throw;
    }
  }
}

}  // namespace ddp::detail
