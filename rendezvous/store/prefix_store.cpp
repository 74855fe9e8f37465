#include "rendezvous/store/prefix_store.hpp"

#include <utility>

namespace ddp {

PrefixStore::PrefixStore(std::string prefix, Store& base)
    : prefix_(std::move(prefix)), base_(base) {}

std::string PrefixStore::join(const std::string& key) const { return prefix_ + "/" + key; }

std::vector<std::string> PrefixStore::join(const std::vector<std::string>& keys) const {
  std::vector<std::string> joined;
  joined.reserve(keys.size());
  for (const auto& key : keys) joined.push_back(join(key));
  return joined;
}

void PrefixStore::set(const std::string& key, const std::string& value) {
  base_.set(join(key), value);
}

std::string PrefixStore::get(const std::string& key) { return base_.get(join(key)); }

int64_t PrefixStore::add(const std::string& key, int64_t delta) {
  return base_.add(join(key), delta);
}

std::string PrefixStore::compareSet(const std::string& key, const std::string& expected,
                                    const std::string& desired) {
  return base_.compareSet(join(key), expected, desired);
}

void PrefixStore::wait(const std::vector<std::string>& keys, std::chrono::milliseconds timeout) {
  base_.wait(join(keys), timeout);
}

bool PrefixStore::check(const std::vector<std::string>& keys) { return base_.check(join(keys)); }

bool PrefixStore::deleteKey(const std::string& key) { return base_.deleteKey(join(key)); }

int64_t PrefixStore::numKeys() { return base_.numKeys(); }

std::vector<std::string> PrefixStore::multiGet(const std::vector<std::string>& keys) {
  return base_.multiGet(join(keys));
}

void PrefixStore::multiSet(const std::vector<std::string>& keys,
                           const std::vector<std::string>& values) {
  base_.multiSet(join(keys), values);
}

void PrefixStore::append(const std::string& key, const std::string& value) {
  base_.append(join(key), value);
}

std::chrono::milliseconds PrefixStore::timeout() const { return base_.timeout(); }

void PrefixStore::setTimeout(std::chrono::milliseconds timeout) { base_.setTimeout(timeout); }

}  // namespace ddp
