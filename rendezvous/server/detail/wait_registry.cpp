#include "rendezvous/server/detail/wait_registry.hpp"

namespace ddp::detail {

WaitRegistry::~WaitRegistry() {
  // Clients may outlive the registry (tests, shutdown order): leave none pointing into it.
  for (auto& [key, waiters] : keys_) {
    for (WaitNode* node = waiters.head; node != nullptr;) {
      WaitNode* next = node->next;
      ServerConnection& client = *node->client;
      client.waits_.erase(&waiters);
      node = next;
    }
  }
}

bool WaitRegistry::park(ServerConnection& client, std::string_view key, int64_t count) {
  auto it = keys_.find(key);
  if (it != keys_.end()) {
    auto mine = client.waits_.find(&it->second);
    if (mine != client.waits_.end()) {
      mine->second.count += count;
      return true;
    }
  }
  auto nodeCharge = Charge::tryTake(budget_, kWaitNodeBytes);
  if (!nodeCharge) return false;
  if (it == keys_.end()) {
    auto keyCharge = Charge::tryTake(budget_, kKeyEntryBytes + key.size());
    if (!keyCharge) return false;
    it = keys_.emplace(std::string(key), KeyWaiters{}).first;
    it->second.key = &it->first;
    it->second.charge = std::move(*keyCharge);
  }
  KeyWaiters& waiters = it->second;
  WaitNode& node = client.waits_[&waiters];
  node.client = &client;
  node.key = &waiters;
  node.count = count;
  node.charge = std::move(*nodeCharge);
  node.prev = waiters.tail;
  if (waiters.tail != nullptr) waiters.tail->next = &node;
  waiters.tail = &node;
  if (waiters.head == nullptr) waiters.head = &node;
  return true;
}

bool WaitRegistry::countDown(const WaitNode& node) {
  ServerConnection& client = *node.client;
  // The legacy server decrements once per listed key and wakes when the count hits zero exactly.
  const bool crosses = client.awaited_ > 0 && client.awaited_ <= node.count;
  client.awaited_ -= node.count;
  return crosses;
}

void WaitRegistry::wakeAll(std::string_view key, std::vector<ServerConnection*>& woken) {
  if (keys_.empty()) return;
  auto it = keys_.find(key);
  if (it == keys_.end()) return;
  KeyWaiters& waiters = it->second;
  for (WaitNode* node = waiters.head; node != nullptr;) {
    WaitNode* next = node->next;
    ServerConnection* client = node->client;
    if (countDown(*node)) woken.push_back(client);
    client->waits_.erase(&waiters);  // destroys *node
    node = next;
  }
  keys_.erase(it);
}

ServerConnection* WaitRegistry::wakeOne(std::string_view key) {
  auto it = keys_.find(key);
  if (it == keys_.end()) return nullptr;
  KeyWaiters& waiters = it->second;
  ServerConnection* woken = nullptr;
  while (waiters.head != nullptr && woken == nullptr) {
    WaitNode& node = *waiters.head;
    ServerConnection* client = node.client;
    if (countDown(node)) woken = client;
    waiters.head = node.next;
    if (waiters.head != nullptr) waiters.head->prev = nullptr;
    client->waits_.erase(&waiters);
  }
  if (waiters.head == nullptr) keys_.erase(it);
  return woken;
}

void WaitRegistry::unlink(WaitNode& node) {
  KeyWaiters& waiters = *node.key;
  (node.prev != nullptr ? node.prev->next : waiters.head) = node.next;
  (node.next != nullptr ? node.next->prev : waiters.tail) = node.prev;
  if (waiters.head == nullptr) keys_.erase(keys_.find(std::string_view(*waiters.key)));
}

void WaitRegistry::unpark(ServerConnection& client) {
  for (auto& [key, node] : client.waits_) unlink(node);
  client.waits_.clear();
  client.awaited_ = 0;
}

}  // namespace ddp::detail
