// SupersededStore: the store a communicator of a quorum is built over (elastic_group.hpp). Its
// waits give up as soon as the quorum board moves past the epoch the build started under: a build
// for a quorum that a newer one replaced would otherwise wait its whole budget for ranks that are
// gone. Every other call goes straight to the wrapped store.
//
// Errors: wait() (and get()/multiGet(), which wait first) throw CommError when the board moved,
// whatever `probe` throws, and the wrapped store's errors (TimeoutError past the budget).
//
// Thread safety: as the wrapped store (one thread: the one building). The store and the board
// must outlive it.
#pragma once

#include <chrono>
#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "rendezvous/quorum/quorum_board.hpp"
#include "rendezvous/store/store.hpp"

namespace ddp::detail {

class SupersededStore final : public Store {
 public:
  // How often `probe` runs while a wait lasts.
  static constexpr auto kProbeInterval = std::chrono::milliseconds(250);

  // `board` null: never superseded. `probe` (may be empty) runs every kProbeInterval of waiting
  // (first kProbeInterval after construction) and may throw to give up.
  SupersededStore(Store& inner, const QuorumBoardReader* board, uint32_t epoch,
                  std::function<void()> probe);

  void set(const std::string& k, const std::string& v) override { inner_.set(k, v); }
  std::string get(const std::string& k) override;
  int64_t add(const std::string& k, int64_t d) override { return inner_.add(k, d); }
  std::string compareSet(const std::string& k, const std::string& e,
                         const std::string& d) override {
    return inner_.compareSet(k, e, d);
  }
  using Store::wait;
  void wait(const std::vector<std::string>& keys, std::chrono::milliseconds timeout) override;
  bool check(const std::vector<std::string>& keys) override { return inner_.check(keys); }
  bool deleteKey(const std::string& k) override { return inner_.deleteKey(k); }
  int64_t numKeys() override { return inner_.numKeys(); }
  std::vector<std::string> multiGet(const std::vector<std::string>& keys) override;
  void multiSet(const std::vector<std::string>& k, const std::vector<std::string>& v) override {
    inner_.multiSet(k, v);
  }
  void append(const std::string& k, const std::string& v) override { inner_.append(k, v); }
  std::chrono::milliseconds timeout() const override { return inner_.timeout(); }
  void setTimeout(std::chrono::milliseconds t) override { inner_.setTimeout(t); }

 private:
  using Clock = std::chrono::steady_clock;
  Store& inner_;
  const QuorumBoardReader* board_;
  uint32_t epoch_;
  std::function<void()> probe_;
  Clock::time_point nextProbe_;
};

}  // namespace ddp::detail
