// ControlledStore: a Store connection that forwards to a real Store and misbehaves on command, the
// way a TcpStoreClient does when its server hangs or its connection breaks (fault injection by
// wrapping, like LevelDB's ErrorEnv).
//
//   hang()         every call from then on gets no answer: it blocks for its budget (timeout();
//                  a wait(keys, t) for t + timeout(), as the unanswered CANCEL_WAIT after it) and
//                  throws TimeoutError; the connection is then failed for good (NetworkError).
//                  release() answers calls again (hung calls in progress still time out).
//   breakNow()     the connection is failed: every call throws NetworkError (sticky).
//   serialise()    calls run one at a time, as on one TCP connection.
//   ON_CLOSE       emulated (withOnClose()): registrations are kept here and applied to the
//                  wrapped store, as COMPARE_SETs, when this object is destroyed without clearing
//                  them (a connection that closes); a connection that failed cleared them first
//                  (the client's farewell). The Journal records what happened, across the
//                  object's lifetime.
// interruptWait() forwards to the wrapped store (when it has ConnectionHooks).
//
// Thread safety: every method may be called from any thread.
#pragma once

#include <algorithm>
#include <atomic>
#include <chrono>
#include <condition_variable>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <utility>
#include <vector>

#include "rendezvous/store/connection_hooks.hpp"
#include "rendezvous/base/error.hpp"
#include "rendezvous/store/store.hpp"

namespace ddp::test {

// What the ON_CLOSE emulation saw: "arm <key>", "clear <n>", "applied <key>", "farewell".
class Journal {
 public:
  void add(std::string entry) {
    {
      std::lock_guard<std::mutex> lock(mutex_);
      entries_.push_back(std::move(entry));
    }
    changed_.notify_all();
  }
  // Blocks until `entry` was recorded or `budget` passed; true when it was.
  bool waitFor(const std::string& entry, std::chrono::milliseconds budget) {
    std::unique_lock<std::mutex> lock(mutex_);
    return changed_.wait_for(lock, budget, [&] {
      return std::find(entries_.begin(), entries_.end(), entry) != entries_.end();
    });
  }
  std::vector<std::string> entries() const {
    std::lock_guard<std::mutex> lock(mutex_);
    return entries_;
  }
  bool contains(const std::string& entry) const {
    const auto all = entries();
    return std::find(all.begin(), all.end(), entry) != all.end();
  }

 private:
  mutable std::mutex mutex_;
  std::condition_variable changed_;
  std::vector<std::string> entries_;  // guarded by mutex_
};

class ControlledStore final : public Store, public ConnectionHooks {
 public:
  explicit ControlledStore(Store& base) : base_(base) {}
  explicit ControlledStore(std::unique_ptr<Store> owned)
      : owned_(std::move(owned)), base_(*owned_) {}
  ~ControlledStore() override {
    std::lock_guard<std::mutex> lock(mutex_);
    for (const auto& [key, values] : onClose_) {
      base_.compareSet(key, values.first, values.second);
      if (journal_) journal_->add("applied " + key);
    }
  }

  // Setup (before use).
  ControlledStore& withOnClose(std::shared_ptr<Journal> journal) {
    journal_ = std::move(journal);
    return *this;
  }
  ControlledStore& serialise() {
    serial_ = true;
    return *this;
  }

  void hang() { hung_ = true; }
  void release() {
    hung_ = false;
    changed_.notify_all();
  }
  void breakNow() { fail(); }
  int64_t calls() const { return calls_.load(); }
  bool failed() const { return failed_.load(); }

  void set(const std::string& k, const std::string& v) override {
    call([&] { base_.set(k, v); });
  }
  std::string get(const std::string& k) override {
    return call([&] { return base_.get(k); });
  }
  int64_t add(const std::string& k, int64_t d) override {
    return call([&] { return base_.add(k, d); });
  }
  std::string compareSet(const std::string& k, const std::string& e,
                         const std::string& d) override {
    return call([&] { return base_.compareSet(k, e, d); });
  }
  using Store::wait;
  void wait(const std::vector<std::string>& k, std::chrono::milliseconds t) override {
    call([&] { base_.wait(k, t); }, t);
  }
  bool check(const std::vector<std::string>& k) override {
    return call([&] { return base_.check(k); });
  }
  bool deleteKey(const std::string& k) override {
    return call([&] { return base_.deleteKey(k); });
  }
  int64_t numKeys() override {
    return call([&] { return base_.numKeys(); });
  }
  std::vector<std::string> multiGet(const std::vector<std::string>& k) override {
    return call([&] { return base_.multiGet(k); });
  }
  void multiSet(const std::vector<std::string>& k, const std::vector<std::string>& v) override {
    call([&] { base_.multiSet(k, v); });
  }
  void append(const std::string& k, const std::string& v) override {
    call([&] { base_.append(k, v); });
  }
  std::chrono::milliseconds timeout() const override { return base_.timeout(); }
  void setTimeout(std::chrono::milliseconds t) override { base_.setTimeout(t); }

  void interruptWait() override {
    if (auto* hooks = dynamic_cast<ConnectionHooks*>(&base_)) hooks->interruptWait();
  }
  bool onCloseSupported() const override { return journal_ != nullptr; }
  bool usable() const override { return !failed_.load(); }
  void armOnClose(const std::string& key, const std::string& expected,
                  const std::string& desired) override {
    call([&] {
      std::lock_guard<std::mutex> lock(mutex_);
      onClose_[key] = {expected, desired};
      journal_->add("arm " + key);
    });
  }
  void clearOnClose(const std::vector<std::string>& keys) override {
    call([&] {
      std::lock_guard<std::mutex> lock(mutex_);
      std::size_t n = 0;
      for (const auto& key : keys) n += onClose_.erase(key);
      if (keys.empty()) n = std::exchange(onClose_, {}).size();
      journal_->add("clear " + std::to_string(n));
    });
  }

 private:
  template <class F>
  auto call(F&& f, std::chrono::milliseconds waitBudget = std::chrono::milliseconds(0))
      -> decltype(f()) {
    ++calls_;
    std::unique_lock<std::mutex> serial(serialMutex_, std::defer_lock);
    if (serial_) serial.lock();
    if (failed_) throw NetworkError("ControlledStore: the connection failed earlier");
    if (hung_) hangUntilBudget(waitBudget);
    return f();
  }

  void hangUntilBudget(std::chrono::milliseconds waitBudget) {
    std::unique_lock<std::mutex> lock(mutex_);
    const auto budget = waitBudget + base_.timeout();
    if (changed_.wait_for(lock, budget, [&] { return !hung_.load(); })) return;
    lock.unlock();
    fail();
    throw TimeoutError("ControlledStore: no answer within " + std::to_string(budget.count()) +
                       " ms (hung on purpose)");
  }

  void fail() {
    failed_ = true;
    std::lock_guard<std::mutex> lock(mutex_);
    if (journal_ && !onClose_.empty()) journal_->add("farewell");
    onClose_.clear();  // the client's farewell ON_CLOSE_CLEAR
  }

  std::unique_ptr<Store> owned_;
  Store& base_;
  std::shared_ptr<Journal> journal_;
  bool serial_ = false;
  std::atomic<bool> hung_{false};
  std::atomic<bool> failed_{false};
  std::atomic<int64_t> calls_{0};
  std::mutex serialMutex_;  // held for a whole call when serialise()d
  std::mutex mutex_;
  std::condition_variable changed_;
  // Guarded by mutex_
  std::map<std::string, std::pair<std::string, std::string>> onClose_;
};

}  // namespace ddp::test
