#include "rendezvous/server/detail/store_state.hpp"

#include <algorithm>
#include <limits>

#include "rendezvous/store/rendezvous_key_names.hpp"

namespace ddp::detail {

using wire::Op;

std::optional<int64_t> parseLegacyInt(std::string_view text) {
  std::size_t i = 0;
  while (i < text.size() && (text[i] == ' ' || (text[i] >= '\t' && text[i] <= '\r'))) ++i;
  bool negative = false;
  if (i < text.size() && (text[i] == '+' || text[i] == '-')) negative = text[i++] == '-';
  if (i >= text.size() || text[i] < '0' || text[i] > '9') return std::nullopt;
  // Accumulate as a negative number so INT64_MIN fits.
  int64_t value = 0;
  constexpr int64_t kMin = std::numeric_limits<int64_t>::min();
  for (; i < text.size() && text[i] >= '0' && text[i] <= '9'; ++i) {
    const int digit = text[i] - '0';
    if (value < (kMin + digit) / 10) return std::nullopt;  // out of range: stoll throws
    value = value * 10 - digit;
  }
  if (negative) return value;
  if (value == kMin) return std::nullopt;
  return -value;
}

bool StoreState::apply(const wire::Request& r, StoreClient& client, std::string& out,
                       std::string& reason) {
  switch (r.op) {
    case Op::kValidate: return true;
    case Op::kPing: wire::encodePingReply(out, r.nonce); return true;
    case Op::kSet: setValue(r.key, r.value); return true;
    case Op::kCompareSet: compareSet(r, out); return true;
    case Op::kGet: getValue(r.key, out); return true;
    case Op::kAdd: return add(r, out, reason);
    case Op::kCheck: check(r, out); return true;
    case Op::kWait: wait(r, client, out); return true;
    case Op::kGetNumKeys: wire::encodeIntReply(out, static_cast<int64_t>(kv_.size())); return true;
    case Op::kWatchKey: wire::encodeByteReply(out, wire::kWatchRegistered); return true;
    case Op::kDeleteKey: deleteKey(r.key, out); return true;
    case Op::kAppend: append(r.key, r.value); return true;
    case Op::kMultiGet:
      for (auto key : r.keys) getValue(key, out);
      return true;
    case Op::kMultiSet:
      for (std::size_t i = 0; i + 1 < r.keys.size(); i += 2) setValue(r.keys[i], r.keys[i + 1]);
      return true;
    case Op::kCancelWait:
      unpark(client);
      wire::encodeByteReply(out, wire::kWaitCanceled);
      return true;
    case Op::kQueuePush: queuePush(r.key, r.value); return true;
    case Op::kQueuePop: queuePop(r, out); return true;
    case Op::kQueueLen: queueLen(r.key, out); return true;
    case Op::kListKeys: listKeys(out); return true;
    case Op::kBarrier: return barrier(r, client, out, reason);
    case Op::kHello: hello(out); return true;
    case Op::kOnClose: onClose(r, client, out); return true;
    case Op::kOnCloseClear: onCloseClear(r, client, out); return true;
  }
  reason = "unhandled op";
  return false;
}

void StoreState::setValue(std::string_view key, std::string_view value) {
  put(key, value);
  wakeAll(key);
}

void StoreState::getValue(std::string_view key, std::string& out) const {
  auto it = kv_.find(key);
  wire::encodeValueReply(out, it == kv_.end() ? std::string_view() : std::string_view(it->second));
}

void StoreState::check(const wire::Request& r, std::string& out) const {
  const bool all = std::all_of(r.keys.begin(), r.keys.end(),
                               [this](std::string_view k) { return exists(k); });
  wire::encodeByteReply(out, all ? wire::kReady : wire::kNotReady);
}

void StoreState::deleteKey(std::string_view key, std::string& out) {
  auto it = kv_.find(key);
  const bool found = it != kv_.end();
  if (found) {
    kv_.erase(it);
    forgetRendezvousKey(key);
  }
  wire::encodeIntReply(out, found ? 1 : 0);
}

void StoreState::append(std::string_view key, std::string_view data) {
  auto it = kv_.find(key);
  if (it == kv_.end()) {
    kv_.emplace(std::string(key), std::string(data));
    noteRendezvousKey(key);
  } else {
    it->second.append(data);
  }
  wakeAll(key);
}

void StoreState::queuePush(std::string_view key, std::string_view value) {
  auto it = queues_.find(key);
  if (it == queues_.end()) it = queues_.emplace(std::string(key), std::deque<std::string>()).first;
  it->second.emplace_back(value);
  wakeOne(key);
}

void StoreState::queueLen(std::string_view key, std::string& out) const {
  auto it = queues_.find(key);
  wire::encodeIntReply(out, it == queues_.end() ? 0 : static_cast<int64_t>(it->second.size()));
}

bool StoreState::exists(std::string_view key) const {
  return kv_.find(key) != kv_.end() || queues_.find(key) != queues_.end();
}

void StoreState::put(std::string_view key, std::string_view value) {
  auto it = kv_.find(key);
  if (it == kv_.end()) {
    kv_.emplace(std::string(key), std::string(value));
    noteRendezvousKey(key);
  } else {
    it->second.assign(value);  // reuses the old value's capacity
  }
}

// Legacy wake rule: every registration under `key` counts down its client; at zero the client
// gets STOP_WAITING. The key's registrations are consumed.
void StoreState::wakeAll(std::string_view key) {
  if (waiters_.empty()) return;
  auto it = waiters_.find(key);
  if (it == waiters_.end()) return;
  const std::vector<StoreClient*> clients = std::move(it->second);
  waiters_.erase(it);
  for (StoreClient* c : clients) {
    auto& keys = c->waitKeys_;
    if (auto k = std::find(keys.begin(), keys.end(), key); k != keys.end()) keys.erase(k);
    if (--c->awaited_ == 0) c->onWaitComplete();
  }
}

// QUEUE_PUSH rule (libuv server): registrations are consumed in order until one client's count
// reaches zero; only that client is woken.
void StoreState::wakeOne(std::string_view key) {
  auto it = waiters_.find(key);
  if (it == waiters_.end()) return;
  auto& clients = it->second;
  StoreClient* woken = nullptr;
  std::size_t used = 0;
  while (used < clients.size() && woken == nullptr) {
    StoreClient* c = clients[used++];
    auto& keys = c->waitKeys_;
    if (auto k = std::find(keys.begin(), keys.end(), key); k != keys.end()) keys.erase(k);
    if (--c->awaited_ == 0) woken = c;
  }
  clients.erase(clients.begin(), clients.begin() + static_cast<std::ptrdiff_t>(used));
  if (clients.empty()) waiters_.erase(it);
  if (woken != nullptr) woken->onWaitComplete();
}

void StoreState::park(StoreClient& client, std::string_view key) {
  auto it = waiters_.find(key);
  if (it == waiters_.end()) it = waiters_.emplace(std::string(key), std::vector<StoreClient*>()).first;
  it->second.push_back(&client);
  client.waitKeys_.emplace_back(key);
}

void StoreState::unpark(StoreClient& client) {
  for (const auto& key : client.waitKeys_) {
    auto it = waiters_.find(key);
    if (it == waiters_.end()) continue;
    std::erase(it->second, &client);
    if (it->second.empty()) waiters_.erase(it);
  }
  client.waitKeys_.clear();
  client.awaited_ = 0;
}

std::vector<AppliedOnClose> StoreState::disconnect(StoreClient& client, bool applyOnClose) {
  unpark(client);
  std::vector<AppliedOnClose> applied;
  const std::vector<OnCloseAction> actions = std::move(client.onClose_);
  client.onClose_.clear();
  if (!applyOnClose) return applied;
  std::string ignored;
  for (const auto& action : actions) {
    wire::Request r;
    r.op = Op::kCompareSet;
    r.key = action.key;
    r.value = action.expected;
    r.desired = action.desired;
    auto it = kv_.find(action.key);
    const bool swaps = it == kv_.end() ? action.expected.empty() : it->second == action.expected;
    ignored.clear();
    compareSet(r, ignored);
    applied.push_back({action, swaps});
  }
  return applied;
}

void StoreState::hello(std::string& out) const {
  // Every client gets every capability; a server's token is checked before, by the session
  // (session_auth.hpp).
  static constexpr std::string_view kFields[] = {"server", "ddprun store"};
  wire::encodeHelloReply(out, wire::kHelloAccepted, wire::kCapOnClose, kFields);
}

void StoreState::onClose(const wire::Request& r, StoreClient& client, std::string& out) const {
  auto& actions = client.onClose_;
  auto it = std::find_if(actions.begin(), actions.end(),
                         [&](const OnCloseAction& a) { return a.key == r.key; });
  if (it != actions.end()) {
    it->expected.assign(r.value);
    it->desired.assign(r.desired);
  } else if (actions.size() >= kMaxOnClosePerClient) {
    wire::encodeIntReply(out, wire::kOnCloseRefused);
    return;
  } else {
    actions.push_back({std::string(r.key), std::string(r.value), std::string(r.desired)});
  }
  wire::encodeIntReply(out, static_cast<int64_t>(actions.size()));
}

void StoreState::onCloseClear(const wire::Request& r, StoreClient& client,
                              std::string& out) const {
  auto& actions = client.onClose_;
  const std::size_t before = actions.size();
  if (r.keys.empty()) {
    actions.clear();
  } else {
    std::erase_if(actions, [&](const OnCloseAction& a) {
      return std::find(r.keys.begin(), r.keys.end(), a.key) != r.keys.end();
    });
  }
  wire::encodeIntReply(out, static_cast<int64_t>(before - actions.size()));
}

void StoreState::compareSet(const wire::Request& r, std::string& out) {
  auto it = kv_.find(r.key);
  if (it == kv_.end()) {
    if (!r.value.empty()) {  // missing key, non-empty expected: reply `expected`, store nothing
      wire::encodeValueReply(out, r.value);
      return;
    }
    kv_.emplace(std::string(r.key), std::string(r.desired));
    noteRendezvousKey(r.key);
    wire::encodeValueReply(out, r.desired);
    wakeAll(r.key);
    return;
  }
  const bool swap = it->second == r.value;
  if (swap) it->second.assign(r.desired);
  wire::encodeValueReply(out, it->second);
  if (swap) wakeAll(r.key);
}

bool StoreState::add(const wire::Request& r, std::string& out, std::string& reason) {
  auto it = kv_.find(r.key);
  int64_t value = r.number;
  if (it != kv_.end()) {
    const auto old = parseLegacyInt(it->second);
    if (!old) {
      reason = "ADD on a non-numeric value (" + std::to_string(it->second.size()) + " bytes)";
      return false;
    }
    value = static_cast<int64_t>(static_cast<uint64_t>(*old) + static_cast<uint64_t>(r.number));
  }
  put(r.key, std::to_string(value));
  wire::encodeIntReply(out, value);
  wakeAll(r.key);
  if (isHeartbeatKey(r.key)) noteHeartbeat(r.key);
  return true;
}

void StoreState::noteHeartbeat(std::string_view key) {
  const auto now = std::chrono::steady_clock::now();
  if (auto it = heartbeatTimes_.find(key); it != heartbeatTimes_.end()) {
    it->second = now;
  } else if (heartbeatTimes_.size() < kMaxHeartbeatTimes) {
    heartbeatTimes_.emplace(std::string(key), now);
  }
}

void StoreState::noteRendezvousKey(std::string_view key) {
  if (key.starts_with(kRendezvousKeyRoot)) rendezvousKeys_.emplace(key);
}

void StoreState::forgetRendezvousKey(std::string_view key) {
  if (!key.starts_with(kRendezvousKeyRoot)) return;
  if (auto it = rendezvousKeys_.find(key); it != rendezvousKeys_.end()) rendezvousKeys_.erase(it);
  if (auto t = heartbeatTimes_.find(key); t != heartbeatTimes_.end()) heartbeatTimes_.erase(t);
}

void StoreState::snapshot(std::size_t budget, StoreSnapshot& out) const {
  out.keys = kv_.size() + queues_.size();
  std::size_t copied = 0;
  for (const auto& key : rendezvousKeys_) {
    const auto it = kv_.find(key);
    if (it == kv_.end()) continue;
    if (copied + key.size() + it->second.size() > budget) {
      out.truncated = true;
      break;
    }
    copied += key.size() + it->second.size();
    out.entries.emplace_back(key, it->second);
    if (auto t = heartbeatTimes_.find(key); t != heartbeatTimes_.end()) {
      out.heartbeatTimes.emplace(key, t->second);
    }
  }
}

void StoreState::wait(const wire::Request& r, StoreClient& client, std::string& out) {
  int64_t missing = 0;
  for (auto key : r.keys) {
    if (exists(key)) continue;
    park(client, key);
    ++missing;
  }
  if (missing == 0) {
    wire::encodeByteReply(out, wire::kStopWaiting);
  } else {
    client.awaited_ = missing;
  }
}

bool StoreState::barrier(const wire::Request& r, StoreClient& client, std::string& out,
                         std::string& reason) {
  auto it = kv_.find(r.key);
  int64_t count = 1;
  if (it != kv_.end()) {
    const auto old = parseLegacyInt(it->second);
    if (!old) {
      reason = "BARRIER on a non-numeric value";
      return false;
    }
    count = *old + 1;
  }
  put(r.key, std::to_string(count));
  if (count >= r.number) {
    wire::encodeByteReply(out, wire::kStopWaiting);
    wakeAll(r.key);
  } else {
    park(client, r.key);
    client.awaited_ = 1;
  }
  return true;
}

void StoreState::queuePop(const wire::Request& r, std::string& out) {
  auto it = queues_.find(r.key);
  if (it == queues_.end()) {
    wire::encodeIntReply(out, 0);
    return;
  }
  wire::encodeIntReply(out, static_cast<int64_t>(it->second.size()));
  wire::encodeValueReply(out, it->second.front());
  it->second.pop_front();
  if (it->second.empty()) queues_.erase(it);
}

void StoreState::listKeys(std::string& out) const {
  wire::encodeIntReply(out, static_cast<int64_t>(kv_.size()));
  for (const auto& [key, value] : kv_) wire::encodeValueReply(out, key);
}

}  // namespace ddp::detail
