// FlakyStore: a Store that forwards to a real one and fails on command (fault injection by
// wrapping, like LevelDB's ErrorEnv).
//
// Every Store call counts (1, 2, 3, ...). Calls listed in failOn() throw NetworkError without
// reaching the wrapped store; failFrom(n) makes call n and every later one throw (a store that went
// away for good). failWith() picks the error type. timeout()/setTimeout() are not counted.
//
// Thread safety: as thread-safe as the wrapped store; the counters are atomic/mutex-guarded.
#pragma once

#include <atomic>
#include <chrono>
#include <cstdint>
#include <functional>
#include <mutex>
#include <set>
#include <string>
#include <vector>

#include "rendezvous/base/error.hpp"
#include "rendezvous/store/store.hpp"

namespace ddp::test {

class FlakyStore final : public Store {
 public:
  explicit FlakyStore(Store& base) : base_(base) {}

  // Call number `n` (1-based, counting every Store call on this object) throws.
  void failOn(int64_t n) {
    std::lock_guard<std::mutex> lock(mutex_);
    failOn_.insert(n);
  }
  // Call `n` and every later call throw.
  void failFrom(int64_t n) { failFrom_.store(n); }
  // Calls that fail throw what `thrower` throws (default: NetworkError naming the call).
  void failWith(std::function<void(const std::string& call)> thrower) {
    std::lock_guard<std::mutex> lock(mutex_);
    thrower_ = std::move(thrower);
  }
  // Calls made so far, failed ones included.
  int64_t calls() const { return calls_.load(); }
  // Calls that failed so far.
  int64_t failures() const { return failures_.load(); }

  void set(const std::string& key, const std::string& value) override {
    gate("set", key);
    base_.set(key, value);
  }
  std::string get(const std::string& key) override {
    gate("get", key);
    return base_.get(key);
  }
  int64_t add(const std::string& key, int64_t delta) override {
    gate("add", key);
    return base_.add(key, delta);
  }
  std::string compareSet(const std::string& key, const std::string& expected,
                         const std::string& desired) override {
    gate("compareSet", key);
    return base_.compareSet(key, expected, desired);
  }
  using Store::wait;
  void wait(const std::vector<std::string>& keys, std::chrono::milliseconds timeout) override {
    gate("wait", keys.empty() ? "" : keys.front());
    base_.wait(keys, timeout);
  }
  bool check(const std::vector<std::string>& keys) override {
    gate("check", keys.empty() ? "" : keys.front());
    return base_.check(keys);
  }
  bool deleteKey(const std::string& key) override {
    gate("deleteKey", key);
    return base_.deleteKey(key);
  }
  int64_t numKeys() override {
    gate("numKeys", "");
    return base_.numKeys();
  }
  std::vector<std::string> multiGet(const std::vector<std::string>& keys) override {
    gate("multiGet", keys.empty() ? "" : keys.front());
    return base_.multiGet(keys);
  }
  void multiSet(const std::vector<std::string>& keys,
                const std::vector<std::string>& values) override {
    gate("multiSet", keys.empty() ? "" : keys.front());
    base_.multiSet(keys, values);
  }
  void append(const std::string& key, const std::string& value) override {
    gate("append", key);
    base_.append(key, value);
  }
  std::chrono::milliseconds timeout() const override { return base_.timeout(); }
  void setTimeout(std::chrono::milliseconds timeout) override { base_.setTimeout(timeout); }

 private:
  void gate(const char* op, const std::string& key) {
    const int64_t n = ++calls_;
    bool fail = n >= failFrom_.load();
    std::function<void(const std::string&)> thrower;
    {
      std::lock_guard<std::mutex> lock(mutex_);
      fail = fail || failOn_.count(n) > 0;
      thrower = thrower_;
    }
    if (!fail) return;
    ++failures_;
    const std::string call = "FlakyStore call #" + std::to_string(n) + " (" + op + " '" + key + "')";
    if (thrower) thrower(call);
    throw NetworkError(call + " failed on purpose");
  }

  Store& base_;
  std::atomic<int64_t> calls_{0};
  std::atomic<int64_t> failures_{0};
  std::atomic<int64_t> failFrom_{INT64_MAX};
  std::mutex mutex_;
  // Guarded by mutex_
  std::set<int64_t> failOn_;
  std::function<void(const std::string&)> thrower_;
};

}  // namespace ddp::test
