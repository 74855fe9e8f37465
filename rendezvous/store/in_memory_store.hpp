// InMemoryStore: a Store held in this process's memory, with TCPStore semantics.
//
// Used by tests, by fault-injection wrappers and anywhere one process plays every participant.
// newHandle() gives a second handle to the same data (as a second connection to one server would:
// its own timeout, its own interruptWait()). The data lives while any handle does.
// Thread safety: fully thread-safe; blocking calls wait on a condition variable.
#pragma once

#include <chrono>
#include <memory>
#include <string>
#include <vector>

#include "rendezvous/store/connection_hooks.hpp"
#include "rendezvous/store/store.hpp"

namespace ddp {

class InMemoryStore final : public Store, public ConnectionHooks {
 public:
  explicit InMemoryStore(std::chrono::milliseconds timeout = std::chrono::seconds(300));
  ~InMemoryStore() override;

  // Another handle to this store's data, with this handle's current timeout. Non-blocking.
  std::unique_ptr<InMemoryStore> newHandle() const;
  // Ends this handle's wait in progress (or its next one) with TimeoutError. Any thread.
  void interruptWait() override;

  void set(const std::string& key, const std::string& value) override;
  std::string get(const std::string& key) override;
  int64_t add(const std::string& key, int64_t delta) override;
  std::string compareSet(const std::string& key, const std::string& expected,
                         const std::string& desired) override;
  using Store::wait;
  void wait(const std::vector<std::string>& keys, std::chrono::milliseconds timeout) override;
  bool check(const std::vector<std::string>& keys) override;
  bool deleteKey(const std::string& key) override;
  int64_t numKeys() override;
  std::vector<std::string> multiGet(const std::vector<std::string>& keys) override;
  void multiSet(const std::vector<std::string>& keys,
                const std::vector<std::string>& values) override;
  void append(const std::string& key, const std::string& value) override;
  std::chrono::milliseconds timeout() const override;
  void setTimeout(std::chrono::milliseconds timeout) override;

 private:
  struct Shared;
  class Impl;
  InMemoryStore(std::shared_ptr<Shared> shared, std::chrono::milliseconds timeout);
  std::unique_ptr<Impl> impl_;
};

}  // namespace ddp
