// PrefixStore: every key is seen as `prefix + "/" + key` in the underlying store (as c10d's
// PrefixStore does), so several users share one store without collisions.
//
// Thread safety: as the underlying store. The underlying store must outlive this object.
#pragma once

#include <chrono>
#include <string>
#include <vector>

#include "rendezvous/store/store.hpp"

namespace ddp {

class PrefixStore final : public Store {
 public:
  PrefixStore(std::string prefix, Store& base);

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

  const std::string& prefix() const { return prefix_; }

 private:
  std::string join(const std::string& key) const;
  std::vector<std::string> join(const std::vector<std::string>& keys) const;

  std::string prefix_;
  Store& base_;
};

}  // namespace ddp
