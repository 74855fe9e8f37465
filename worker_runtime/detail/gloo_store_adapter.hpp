// GlooStoreAdapter: lets Gloo's rendezvous (gloo::rendezvous::Context::connectFullMesh) exchange
// transport addresses through any ddp::Store.
//
// Only set/get/wait(+timeout) are needed. Keys are prefixed with `prefix + "/"`. Values are raw
// bytes either way, so no encoding is applied.
//
// Thread safety: as the wrapped store. The store must outlive the adapter.
#pragma once

#include <chrono>
#include <string>
#include <vector>

#include <gloo/rendezvous/store.h>

#include "rendezvous/store/store.hpp"

namespace ddp::detail {

class GlooStoreAdapter final : public gloo::rendezvous::Store {
 public:
  // `timeout` bounds get() and the wait() overload without a timeout.
  GlooStoreAdapter(ddp::Store& store, std::string prefix, std::chrono::milliseconds timeout);

  // Does not block. Throws NetworkError.
  void set(const std::string& key, const std::vector<char>& data) override;
  // Blocks until the key exists or the adapter's timeout passes (TimeoutError).
  std::vector<char> get(const std::string& key) override;
  // Blocks until every key exists or the timeout passes (TimeoutError naming the keys).
  void wait(const std::vector<std::string>& keys) override;
  void wait(const std::vector<std::string>& keys,
            const std::chrono::milliseconds& timeout) override;

 private:
  std::string key(const std::string& k) const { return prefix_ + "/" + k; }

  ddp::Store& store_;
  std::string prefix_;
  std::chrono::milliseconds timeout_;
};

}  // namespace ddp::detail
