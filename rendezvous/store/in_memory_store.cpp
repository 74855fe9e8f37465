#include "rendezvous/store/in_memory_store.hpp"

#include <condition_variable>
#include <map>
#include <mutex>
#include <stdexcept>

#include "rendezvous/base/error.hpp"

namespace ddp {

// The state every handle of one store shares.
struct InMemoryStore::Shared {
  std::mutex mutex;
  std::condition_variable changed;
  // Guarded by mutex
  std::map<std::string, std::string> data;
};

class InMemoryStore::Impl {
 public:
  Impl(std::shared_ptr<Shared> shared, std::chrono::milliseconds timeout)
      : shared_(std::move(shared)),
        mutex_(shared_->mutex),
        changed_(shared_->changed),
        data_(shared_->data),
        timeout_(timeout) {}

  std::shared_ptr<Shared> shared_;
  std::mutex& mutex_;
  std::condition_variable& changed_;
  // Guarded by mutex_
  std::map<std::string, std::string>& data_;
  std::chrono::milliseconds timeout_;  // this handle's
  bool interrupted_ = false;           // this handle's latched interruptWait()

  bool allPresent(const std::vector<std::string>& keys) const {
    for (const auto& key : keys) {
      if (data_.find(key) == data_.end()) return false;
    }
    return true;
  }

  // Waits with mutex_ held (through `lock`) until every key exists; throws TimeoutError at the
  // timeout or when interrupted.
  void waitLocked(std::unique_lock<std::mutex>& lock, const std::vector<std::string>& keys,
                  std::chrono::milliseconds timeout) {
    const bool woken = changed_.wait_for(lock, timeout,
                                         [&] { return interrupted_ || allPresent(keys); });
    if (allPresent(keys)) return;
    std::string missing;
    for (const auto& key : keys) {
      if (data_.find(key) != data_.end()) continue;
      missing += (missing.empty() ? "" : ", ") + key;
    }
    if (woken) {
      interrupted_ = false;
      throw TimeoutError("interrupted while waiting for keys [" + missing +
                         "] in the in-memory store");
    }
    throw TimeoutError("timed out after " + std::to_string(timeout.count()) +
                       " ms waiting for keys [" + missing + "] in the in-memory store");
  }
};

namespace {

int64_t parseCounter(const std::string& key, const std::string& value) {
  try {
    size_t used = 0;
    const int64_t parsed = std::stoll(value, &used);
    return parsed;
  } catch (const std::exception&) {
    throw ProtocolError("add on key '" + key + "' whose value '" + value + "' is not an integer");
  }
}

}  // namespace

InMemoryStore::InMemoryStore(std::chrono::milliseconds timeout)
    : impl_(std::make_unique<Impl>(std::make_shared<Shared>(), timeout)) {}

InMemoryStore::InMemoryStore(std::shared_ptr<Shared> shared, std::chrono::milliseconds timeout)
    : impl_(std::make_unique<Impl>(std::move(shared), timeout)) {}

std::unique_ptr<InMemoryStore> InMemoryStore::newHandle() const {
  return std::unique_ptr<InMemoryStore>(new InMemoryStore(impl_->shared_, timeout()));
}

void InMemoryStore::interruptWait() {
  {
    std::lock_guard<std::mutex> lock(impl_->mutex_);
    impl_->interrupted_ = true;
  }
  impl_->changed_.notify_all();
}

InMemoryStore::~InMemoryStore() = default;

void InMemoryStore::set(const std::string& key, const std::string& value) {
  {
    std::lock_guard<std::mutex> lock(impl_->mutex_);
    impl_->data_[key] = value;
  }
  impl_->changed_.notify_all();
}

std::string InMemoryStore::get(const std::string& key) {
  std::unique_lock<std::mutex> lock(impl_->mutex_);
  impl_->waitLocked(lock, {key}, impl_->timeout_);
  return impl_->data_.at(key);
}

int64_t InMemoryStore::add(const std::string& key, int64_t delta) {
  int64_t result = delta;
  {
    std::lock_guard<std::mutex> lock(impl_->mutex_);
    auto it = impl_->data_.find(key);
    if (it != impl_->data_.end()) result = parseCounter(key, it->second) + delta;
    impl_->data_[key] = std::to_string(result);
  }
  impl_->changed_.notify_all();
  return result;
}

std::string InMemoryStore::compareSet(const std::string& key, const std::string& expected,
                                      const std::string& desired) {
  std::string result;
  {
    std::lock_guard<std::mutex> lock(impl_->mutex_);
    auto it = impl_->data_.find(key);
    if (it == impl_->data_.end()) {
      if (!expected.empty()) return expected;  // c10d: a missing key with expected != "" "lies"
      impl_->data_[key] = desired;
      result = desired;
    } else {
      if (it->second == expected) it->second = desired;
      result = it->second;
    }
  }
  impl_->changed_.notify_all();
  return result;
}

void InMemoryStore::wait(const std::vector<std::string>& keys, std::chrono::milliseconds timeout) {
  std::unique_lock<std::mutex> lock(impl_->mutex_);
  impl_->waitLocked(lock, keys, timeout);
}

bool InMemoryStore::check(const std::vector<std::string>& keys) {
  std::lock_guard<std::mutex> lock(impl_->mutex_);
  return impl_->allPresent(keys);
}

bool InMemoryStore::deleteKey(const std::string& key) {
  std::lock_guard<std::mutex> lock(impl_->mutex_);
  return impl_->data_.erase(key) > 0;
}

int64_t InMemoryStore::numKeys() {
  std::lock_guard<std::mutex> lock(impl_->mutex_);
  return static_cast<int64_t>(impl_->data_.size());
}

std::vector<std::string> InMemoryStore::multiGet(const std::vector<std::string>& keys) {
  std::unique_lock<std::mutex> lock(impl_->mutex_);
  impl_->waitLocked(lock, keys, impl_->timeout_);
  std::vector<std::string> values;
  values.reserve(keys.size());
  for (const auto& key : keys) values.push_back(impl_->data_.at(key));
  return values;
}

void InMemoryStore::multiSet(const std::vector<std::string>& keys,
                             const std::vector<std::string>& values) {
  if (keys.size() != values.size()) {
    throw std::invalid_argument("multiSet: " + std::to_string(keys.size()) + " keys but " +
                                std::to_string(values.size()) + " values");
  }
  {
    std::lock_guard<std::mutex> lock(impl_->mutex_);
    for (size_t i = 0; i < keys.size(); ++i) impl_->data_[keys[i]] = values[i];
  }
  impl_->changed_.notify_all();
}

void InMemoryStore::append(const std::string& key, const std::string& value) {
  {
    std::lock_guard<std::mutex> lock(impl_->mutex_);
    impl_->data_[key] += value;
  }
  impl_->changed_.notify_all();
}

std::chrono::milliseconds InMemoryStore::timeout() const {
  std::lock_guard<std::mutex> lock(impl_->mutex_);
  return impl_->timeout_;
}

void InMemoryStore::setTimeout(std::chrono::milliseconds timeout) {
  std::lock_guard<std::mutex> lock(impl_->mutex_);
  impl_->timeout_ = timeout;
}

}  // namespace ddp
