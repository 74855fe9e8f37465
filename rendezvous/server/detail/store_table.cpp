#include "rendezvous/server/detail/store_table.hpp"

#include "rendezvous/store/rendezvous_key_names.hpp"

namespace ddp::detail {

const Blob* StoreTable::find(std::string_view key) const {
  auto it = values_.find(key);
  return it == values_.end() ? nullptr : &it->second.value;
}

bool StoreTable::exists(std::string_view key) const {
  return values_.find(key) != values_.end() || queues_.find(key) != queues_.end();
}

std::size_t StoreTable::queueLength(std::string_view key) const {
  auto it = queues_.find(key);
  return it == queues_.end() ? 0 : it->second.items.size();
}

bool StoreTable::put(std::string_view key, Blob value) {
  auto it = values_.find(key);
  if (it != values_.end()) {
    it->second.value = std::move(value);
    journal(MutationKind::kPut, key, it->second.value.view());
    return true;
  }
  auto charge = Charge::tryTake(budget_, kTableEntryBytes + key.size());
  if (!charge) return false;
  journal(MutationKind::kPut, key, value.view());
  values_.emplace(std::string(key), Entry{std::move(value), std::move(*charge)});
  keyBytes_ += key.size();
  if (key.starts_with(kRendezvousKeyRoot)) rendezvousKeys_.emplace(key);
  return true;
}

bool StoreTable::append(std::string_view key, std::string_view data) {
  auto it = values_.find(key);
  if (it == values_.end()) {
    auto value = Blob::copy(budget_, data);
    return value && put(key, std::move(*value));
  }
  if (!it->second.value.append(budget_, data)) return false;
  journal(MutationKind::kAppend, key, data);
  return true;
}

bool StoreTable::erase(std::string_view key) {
  auto it = values_.find(key);
  if (it == values_.end()) return false;
  keyBytes_ -= it->first.size();
  values_.erase(it);
  if (key.starts_with(kRendezvousKeyRoot)) {
    if (auto k = rendezvousKeys_.find(key); k != rendezvousKeys_.end()) rendezvousKeys_.erase(k);
    if (auto t = heartbeatTimes_.find(key); t != heartbeatTimes_.end()) heartbeatTimes_.erase(t);
  }
  journal(MutationKind::kErase, key);
  return true;
}

bool StoreTable::queuePush(std::string_view key, Blob value) {
  auto itemCharge = Charge::tryTake(budget_, kQueueItemBytes);
  if (!itemCharge) return false;
  auto it = queues_.find(key);
  if (it == queues_.end()) {
    auto charge = Charge::tryTake(budget_, kQueueBytes + key.size());
    if (!charge) return false;
    it = queues_.emplace(std::string(key), Queue{{}, std::move(*charge)}).first;
  }
  journal(MutationKind::kQueuePush, key, value.view());
  it->second.items.push_back(QueueItem{std::move(value), std::move(*itemCharge)});
  return true;
}

std::optional<std::pair<std::size_t, Blob>> StoreTable::queuePop(std::string_view key) {
  auto it = queues_.find(key);
  if (it == queues_.end()) return std::nullopt;
  auto& items = it->second.items;
  std::pair<std::size_t, Blob> popped{items.size(), std::move(items.front().value)};
  items.pop_front();
  if (items.empty()) queues_.erase(it);
  journal(MutationKind::kQueuePop, key);
  return popped;
}

void StoreTable::clear() {
  journal(MutationKind::kClear, {});
  values_.clear();
  queues_.clear();
  keyBytes_ = 0;
  rendezvousKeys_.clear();
  heartbeatTimes_.clear();
}

void StoreTable::noteHeartbeat(std::string_view key) {
  const auto now = std::chrono::steady_clock::now();
  if (auto it = heartbeatTimes_.find(key); it != heartbeatTimes_.end()) {
    it->second = now;
  } else if (heartbeatTimes_.size() < kMaxHeartbeatTimes) {
    heartbeatTimes_.emplace(std::string(key), now);
  }
}

std::optional<std::chrono::steady_clock::time_point> StoreTable::heartbeatTime(
    std::string_view key) const {
  auto it = heartbeatTimes_.find(key);
  if (it == heartbeatTimes_.end()) return std::nullopt;
  return it->second;
}

}  // namespace ddp::detail
