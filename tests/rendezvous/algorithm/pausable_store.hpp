// PausableStore: wraps a real Store; while paused every call blocks until resume(), the way an
// agent's store calls stop under SIGSTOP (its heartbeats stop, its peers declare it lost) and go
// on after SIGCONT. A hook may run before a chosen compareSet, to order a race exactly.
//
// Thread safety: all methods are safe from any thread.
#pragma once

#include <condition_variable>
#include <functional>
#include <mutex>
#include <string>
#include <vector>

#include "rendezvous/store/store.hpp"

namespace ddp::test {

class PausableStore final : public Store {
 public:
  using Hook = std::function<void()>;
  explicit PausableStore(Store& base) : base_(base) {}

  void pause() {
    std::lock_guard<std::mutex> lock(mutex_);
    paused_ = true;
  }
  void resume() {
    {
      std::lock_guard<std::mutex> lock(mutex_);
      paused_ = false;
    }
    cv_.notify_all();
  }
  // Runs `hook` once, just before the first compareSet whose desired value is `desired`.
  void beforeCompareSetTo(std::string desired, Hook hook) {
    std::lock_guard<std::mutex> lock(mutex_);
    hookDesired_ = std::move(desired);
    hook_ = std::move(hook);
  }

  void set(const std::string& k, const std::string& v) override { gate(); base_.set(k, v); }
  std::string get(const std::string& k) override { gate(); return base_.get(k); }
  int64_t add(const std::string& k, int64_t d) override { gate(); return base_.add(k, d); }
  std::string compareSet(const std::string& k, const std::string& e,
                         const std::string& d) override {
    gate();
    Hook hook;
    {
      std::lock_guard<std::mutex> lock(mutex_);
      if (hook_ && d == hookDesired_) std::swap(hook, hook_);
    }
    if (hook) hook();
    return base_.compareSet(k, e, d);
  }
  using Store::wait;
  void wait(const std::vector<std::string>& k, std::chrono::milliseconds t) override {
    gate();
    base_.wait(k, t);
  }
  bool check(const std::vector<std::string>& k) override { gate(); return base_.check(k); }
  bool deleteKey(const std::string& k) override { gate(); return base_.deleteKey(k); }
  int64_t numKeys() override { gate(); return base_.numKeys(); }
  std::vector<std::string> multiGet(const std::vector<std::string>& k) override {
    gate();
    return base_.multiGet(k);
  }
  void multiSet(const std::vector<std::string>& k, const std::vector<std::string>& v) override {
    gate();
    base_.multiSet(k, v);
  }
  void append(const std::string& k, const std::string& v) override { gate(); base_.append(k, v); }
  std::chrono::milliseconds timeout() const override { return base_.timeout(); }
  void setTimeout(std::chrono::milliseconds t) override { base_.setTimeout(t); }

 private:
  void gate() {
    std::unique_lock<std::mutex> lock(mutex_);
    cv_.wait(lock, [this] { return !paused_; });
  }

  Store& base_;
  std::mutex mutex_;
  std::condition_variable cv_;
  // Guarded by mutex_
  bool paused_ = false;
  std::string hookDesired_;
  Hook hook_;
};

}  // namespace ddp::test
