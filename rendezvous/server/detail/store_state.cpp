#include "rendezvous/server/detail/store_state.hpp"

#include <algorithm>
#include <limits>

#include "rendezvous/store/rendezvous_key_names.hpp"

namespace ddp::detail {

using wire::Op;

namespace {

std::string mib(std::size_t bytes) {
  return std::to_string((bytes + (std::size_t{1} << 19)) >> 20) + " MiB";
}

// A request's value that the store would copy: its bytes plus the allocation.
std::size_t copyCost(std::string_view value) {
  return value.empty() ? 0 : value.size() + kAllocationOverhead;
}

}  // namespace

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

bool StoreState::apply(const wire::Request& r, ServerConnection& client, OutputQueue& out,
                       std::string& reason, const Blob* buffer) {
  refusedForMemory_ = false;
  switch (r.op) {
    case Op::kValidate: return true;
    case Op::kPing: out.putU32(r.nonce); return true;
    case Op::kSet: return setValue(r, buffer, reason);
    case Op::kCompareSet: return compareSet(r.key, r.value, r.desired, buffer, &out, reason);
    case Op::kGet: return getValue(r.key, out, reason);
    case Op::kAdd: return add(r, out, reason);
    case Op::kCheck: check(r, out); return true;
    case Op::kWait: return wait(r, client, out, reason);
    case Op::kGetNumKeys: out.putI64(static_cast<int64_t>(table_.numKeys())); return true;
    case Op::kWatchKey: out.putU8(wire::kWatchRegistered); return true;
    case Op::kDeleteKey: out.putI64(table_.erase(r.key) ? 1 : 0); return true;
    case Op::kAppend: return append(r, reason);
    case Op::kMultiGet: return multiGet(r, out, reason);
    case Op::kMultiSet: return multiSet(r, buffer, reason);
    case Op::kCancelWait:
      waits_.unpark(client);
      out.putU8(wire::kWaitCanceled);
      return true;
    case Op::kQueuePush: return queuePush(r, buffer, reason);
    case Op::kQueuePop: return queuePop(r.key, out, reason);
    case Op::kQueueLen: out.putI64(static_cast<int64_t>(table_.queueLength(r.key))); return true;
    case Op::kListKeys: return listKeys(out, reason);
    case Op::kBarrier: return barrier(r, client, out, reason);
    case Op::kHello: hello(out); return true;
    case Op::kOnClose: return onClose(r, client, out, reason);
    case Op::kOnCloseClear: onCloseClear(r, client, out); return true;
    case Op::kRequestId: return true;  // tags the next request (SessionProtocol)
  }
  reason = "unhandled op";
  return false;
}

bool StoreState::preset(std::string_view key, std::string_view value) {
  auto blob = Blob::copy(budget_, value);
  return blob && table_.put(key, std::move(*blob));
}

std::optional<Blob> StoreState::makeValue(std::string_view bytes, const Blob* buffer) {
  if (buffer != nullptr && bytes.size() >= kKeepBufferAbove &&
      2 * bytes.size() >= buffer->capacity()) {
    const auto whole = buffer->view();
    if (bytes.data() >= whole.data() && bytes.data() + bytes.size() <= whole.data() + whole.size()) {
      return Blob::alias(*buffer, bytes);
    }
  }
  return Blob::copy(budget_, bytes);
}

bool StoreState::refuse(std::string& reason, std::string_view what, std::size_t bytes) {
  refusedForMemory_ = true;
  reason = std::string(what) + " needs " + std::to_string(bytes) +
           " bytes the memory budget does not have (" + mib(budget_.used()) + " of " +
           mib(budget_.limit()) + " in use; --max-memory)";
  return false;
}

void StoreState::wakeAll(std::string_view key) {
  if (waits_.empty()) return;
  woken_.clear();
  waits_.wakeAll(key, woken_);
  for (ServerConnection* c : woken_) c->onWaitComplete();
}

bool StoreState::setValue(const wire::Request& r, const Blob* buffer, std::string& reason) {
  auto value = makeValue(r.value, buffer);
  if (!value || !table_.put(r.key, std::move(*value))) {
    return refuse(reason, "SET", r.key.size() + r.value.size());
  }
  wakeAll(r.key);
  return true;
}

bool StoreState::getValue(std::string_view key, OutputQueue& out, std::string& reason) {
  static const Blob kEmpty;
  const Blob* value = table_.find(key);
  if (value == nullptr) value = &kEmpty;
  if (!out.reserve(OutputQueue::copiedBytes(*value), 1)) {
    return refuse(reason, "a GET reply", value->size());
  }
  out.putValue(*value);
  return true;
}

bool StoreState::multiGet(const wire::Request& r, OutputQueue& out, std::string& reason) {
  static const Blob kEmpty;
  std::size_t bytes = 0;
  for (auto key : r.keys) {
    const Blob* value = table_.find(key);
    bytes += OutputQueue::copiedBytes(value != nullptr ? *value : kEmpty);
  }
  if (!out.reserve(bytes, r.keys.size())) return refuse(reason, "a MULTI_GET reply", bytes);
  for (auto key : r.keys) {
    const Blob* value = table_.find(key);
    out.putValue(value != nullptr ? *value : kEmpty);
  }
  return true;
}

bool StoreState::multiSet(const wire::Request& r, const Blob* buffer, std::string& reason) {
  // All or nothing: the worst case (every value copied, every key new) must fit first.
  std::size_t bytes = 0;
  for (std::size_t i = 0; i + 1 < r.keys.size(); i += 2) {
    bytes += kTableEntryBytes + r.keys[i].size() + copyCost(r.keys[i + 1]);
  }
  if (!budget_.fits(bytes)) return refuse(reason, "MULTI_SET", bytes);
  for (std::size_t i = 0; i + 1 < r.keys.size(); i += 2) {
    auto value = makeValue(r.keys[i + 1], buffer);
    if (!value || !table_.put(r.keys[i], std::move(*value))) {
      return refuse(reason, "MULTI_SET", bytes);  // unreachable after the check above
    }
    wakeAll(r.keys[i]);
  }
  return true;
}

void StoreState::check(const wire::Request& r, OutputQueue& out) const {
  const bool all = std::all_of(r.keys.begin(), r.keys.end(),
                               [this](std::string_view k) { return table_.exists(k); });
  out.putU8(all ? wire::kReady : wire::kNotReady);
}

bool StoreState::append(const wire::Request& r, std::string& reason) {
  if (!table_.append(r.key, r.value)) {
    return refuse(reason, "APPEND", r.key.size() + r.value.size());
  }
  wakeAll(r.key);
  return true;
}

bool StoreState::compareSet(std::string_view key, std::string_view expected,
                            std::string_view desired, const Blob* buffer, OutputQueue* out,
                            std::string& reason) {
  const Blob* current = table_.find(key);
  if (current == nullptr && !expected.empty()) {
    // Missing key, non-empty expected: reply `expected`, store nothing (upstream "lies").
    if (out != nullptr) {
      if (!out->reserve(8 + expected.size())) return refuse(reason, "a COMPARE_SET reply", 0);
      out->putStr(expected);
    }
    return true;
  }
  const bool swap = current == nullptr || current->view() == expected;
  if (swap) {
    auto value = makeValue(desired, buffer);
    if (!value || !table_.put(key, std::move(*value))) {
      return refuse(reason, "COMPARE_SET", key.size() + desired.size());
    }
    current = table_.find(key);
  }
  if (out != nullptr) {
    if (!out->reserve(OutputQueue::copiedBytes(*current), 1)) {
      return refuse(reason, "a COMPARE_SET reply", current->size());
    }
    out->putValue(*current);
  }
  if (swap) wakeAll(key);
  return true;
}

bool StoreState::storeNumber(std::string_view key, int64_t value, std::string& reason) {
  const std::string text = std::to_string(value);
  auto blob = Blob::copy(budget_, text);
  if (!blob || !table_.put(key, std::move(*blob))) return refuse(reason, "a counter", text.size());
  return true;
}

bool StoreState::add(const wire::Request& r, OutputQueue& out, std::string& reason) {
  int64_t value = r.number;
  if (const Blob* old = table_.find(r.key)) {
    const auto before = parseLegacyInt(old->view());
    if (!before) {
      reason = "ADD on a non-numeric value (" + std::to_string(old->size()) + " bytes)";
      return false;
    }
    if (__builtin_add_overflow(*before, r.number, &value)) {
      reason = "ADD " + std::to_string(r.number) + " to " + std::to_string(*before) +
               " overflows a 64-bit counter";
      return false;
    }
  }
  if (!storeNumber(r.key, value, reason)) return false;
  out.putI64(value);
  wakeAll(r.key);
  if (isHeartbeatKey(r.key)) table_.noteHeartbeat(r.key);
  return true;
}

void StoreState::snapshot(std::size_t budget, StoreSnapshot& out) const {
  out.keys = table_.numKeys();
  std::size_t copied = 0;
  for (const auto& key : table_.rendezvousKeys()) {
    const Blob* value = table_.find(key);
    if (value == nullptr) continue;
    if (copied + key.size() + value->size() > budget) {
      out.truncated = true;
      break;
    }
    copied += key.size() + value->size();
    out.entries.emplace_back(key, std::string(value->view()));
    if (auto t = table_.heartbeatTime(key)) out.heartbeatTimes.emplace(key, *t);
  }
}

bool StoreState::wait(const wire::Request& r, ServerConnection& client, OutputQueue& out,
                      std::string& reason) {
  int64_t missing = 0;
  for (auto key : r.keys) {
    if (table_.exists(key)) continue;
    if (!waits_.park(client, key, 1)) return refuse(reason, "a WAIT registration", key.size());
    ++missing;
  }
  if (missing == 0) {
    out.putU8(wire::kStopWaiting);
  } else {
    client.awaited_ = missing;
  }
  return true;
}

bool StoreState::barrier(const wire::Request& r, ServerConnection& client, OutputQueue& out,
                         std::string& reason) {
  int64_t count = 1;
  if (const Blob* old = table_.find(r.key)) {
    const auto before = parseLegacyInt(old->view());
    if (!before) {
      reason = "BARRIER on a non-numeric value";
      return false;
    }
    if (__builtin_add_overflow(*before, 1, &count)) {
      reason = "BARRIER on a counter at " + std::to_string(*before) + " overflows";
      return false;
    }
  }
  if (count < r.number && !waits_.park(client, r.key, 1)) {
    return refuse(reason, "a BARRIER registration", r.key.size());
  }
  if (!storeNumber(r.key, count, reason)) {
    waits_.unpark(client);
    return false;
  }
  if (count >= r.number) {
    out.putU8(wire::kStopWaiting);
    wakeAll(r.key);
  } else {
    client.awaited_ = 1;
  }
  return true;
}

bool StoreState::queuePush(const wire::Request& r, const Blob* buffer, std::string& reason) {
  auto value = makeValue(r.value, buffer);
  if (!value || !table_.queuePush(r.key, std::move(*value))) {
    return refuse(reason, "QUEUE_PUSH", r.key.size() + r.value.size());
  }
  if (ServerConnection* woken = waits_.wakeOne(r.key)) woken->onWaitComplete();
  return true;
}

bool StoreState::queuePop(std::string_view key, OutputQueue& out, std::string& reason) {
  if (table_.queueLength(key) == 0) {
    out.putI64(0);
    return true;
  }
  // Reserve before popping so that a refused reply loses nothing.
  if (!out.reserve(8 + 8 + OutputQueue::kReferenceAbove, 1)) {
    return refuse(reason, "a QUEUE_POP reply", 0);
  }
  auto popped = table_.queuePop(key);
  out.putI64(static_cast<int64_t>(popped->first));
  out.putValue(popped->second);
  return true;
}

bool StoreState::listKeys(OutputQueue& out, std::string& reason) {
  const std::size_t bytes = 8 + 8 * table_.numKeys() + table_.keyBytes();
  if (!out.reserve(bytes)) return refuse(reason, "a LIST_KEYS reply", bytes);
  out.putI64(static_cast<int64_t>(table_.numKeys()));
  table_.forEachKey([&](std::string_view key) { out.putStr(key); });
  return true;
}

}  // namespace ddp::detail
