#include "worker_runtime/detail/gloo_store_adapter.hpp"

namespace ddp::detail {

GlooStoreAdapter::GlooStoreAdapter(ddp::Store& store, std::string prefix,
                                   std::chrono::milliseconds timeout)
    : store_(store), prefix_(std::move(prefix)), timeout_(timeout) {}

void GlooStoreAdapter::set(const std::string& k, const std::vector<char>& data) {
  store_.set(key(k), std::string(data.begin(), data.end()));
}

std::vector<char> GlooStoreAdapter::get(const std::string& k) {
  // wait() first: Store::get() uses the store's own budget, which may exceed the communicator's.
  store_.wait({key(k)}, timeout_);
  std::string value = store_.get(key(k));
  return std::vector<char>(value.begin(), value.end());
}

void GlooStoreAdapter::wait(const std::vector<std::string>& keys) { wait(keys, timeout_); }

void GlooStoreAdapter::wait(const std::vector<std::string>& keys,
                            const std::chrono::milliseconds& timeout) {
  std::vector<std::string> full;
  full.reserve(keys.size());
  for (const auto& k : keys) full.push_back(key(k));
  // Gloo passes kNoTimeout (zero) to mean "no timeout of its own": use ours.
  store_.wait(full, timeout.count() > 0 ? timeout : timeout_);
}

}  // namespace ddp::detail
