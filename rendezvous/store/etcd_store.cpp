#include "rendezvous/store/etcd_store.hpp"

#include <algorithm>
#include <charconv>
#include <cstdio>
#include <iterator>
#include <map>
#include <random>
#include <set>
#include <stdexcept>

#include <nlohmann/json.hpp>

#include "rendezvous/security/tls_context.hpp"
#include "rendezvous/store/detail/etcd_client.hpp"
#include "rendezvous/store/detail/etcd_watch.hpp"
#include "rendezvous/base/error.hpp"

namespace ddp {

using detail::base64Decode;
using detail::base64Encode;
using detail::jsonInt;
using nlohmann::json;

namespace {

// The smallest key greater than every key that starts with `prefix` (etcd's range_end).
std::string prefixEnd(std::string prefix) {
  while (!prefix.empty()) {
    unsigned char last = static_cast<unsigned char>(prefix.back());
    if (last < 0xff) {
      prefix.back() = static_cast<char>(last + 1);
      return prefix;
    }
    prefix.pop_back();
  }
  return std::string(1, '\0');  // with key "\0": every key
}

json rangeOp(const std::string& key, bool countOnly) {
  json range{{"key", base64Encode(key)}};
  if (countOnly) range["count_only"] = true;
  return json{{"request_range", range}};
}

json putOp(const std::string& key, const std::string& value) {
  return json{{"request_put", {{"key", base64Encode(key)}, {"value", base64Encode(value)}}}};
}

json putOp(const std::string& key, const std::string& value, int64_t lease) {
  return json{{"request_put",
               {{"key", base64Encode(key)}, {"value", base64Encode(value)},
                {"lease", std::to_string(lease)}}}};
}

std::string randomMarker() {
  std::random_device device;
  char hex[17];
  std::snprintf(hex, sizeof(hex), "%08x%08x", device(), device());
  return std::string("/ddp-request-ids/") + hex;
}

// The first kv of a range answer, or nullptr.
const json* firstKv(const json& range) {
  auto kvs = range.find("kvs");
  if (kvs == range.end() || !kvs->is_array() || kvs->empty()) return nullptr;
  return &kvs->front();
}

std::string valueOf(const json& kv, const std::string& key) {
  return base64Decode(kv.value("value", ""), "the value of " + key);
}

// "[a, b, c]"; long lists are cut after 8 keys so messages stay readable.
std::string joinKeys(const std::vector<std::string>& keys) {
  std::string out;
  for (std::size_t i = 0; i < keys.size() && i < 8; ++i) out += (i == 0 ? "" : ", ") + keys[i];
  if (keys.size() > 8) out += ", ... (" + std::to_string(keys.size()) + " keys)";
  return "[" + out + "]";
}

// etcd's default --max-txn-ops: larger batches are split into several txns.
constexpr std::size_t kMaxTxnOps = 128;

int64_t parseCounter(const std::string& key, const std::string& text) {
  if (text.empty()) return 0;
  int64_t value = 0;
  auto [ptr, ec] = std::from_chars(text.data(), text.data() + text.size(), value);
  if (ec != std::errc() || ptr != text.data() + text.size()) {
    throw ProtocolError("etcd add on key " + key + ": the value '" + text.substr(0, 64) +
                        "' is not an integer");
  }
  return value;
}

}  // namespace

// The result an earlier attempt of the request tagged `tag` recorded in the marker (read by a
// txn's failure branch), or nullopt.
std::optional<std::string> appliedBefore(const json& reply, std::size_t index,
                                         const std::string& marker, const std::string& tag) {
  const json* kv = firstKv(reply.at("responses").at(index).at("response_range"));
  if (kv == nullptr) return std::nullopt;
  std::string recorded = valueOf(*kv, marker);
  if (recorded.rfind(tag, 0) != 0) return std::nullopt;
  return recorded.substr(tag.size());
}

EtcdStore::EtcdStore(EtcdStoreOptions options)
    : options_(std::move(options)), timeoutMs_(options_.timeout.count()), marker_(randomMarker()) {
  std::vector<detail::EtcdEndpoint> endpoints;
  for (const Endpoint& e : options_.endpoints) {
    if (e.host.empty() || e.port <= 0 || e.port > 65535) {
      throw ConfigError("etcd endpoint '" + formatEndpoint(e) +
                        "' needs host:port with a port 1-65535");
    }
    endpoints.push_back({e.host, std::to_string(e.port), options_.https});
  }
  auto tls =
      options_.https && options_.tls.enabled() ? makeClientTlsContext(options_.tls) : nullptr;
  if (options_.pollMin.count() <= 0 || options_.pollMax < options_.pollMin) {
    throw ConfigError("etcd store: need 0 < pollMin <= pollMax");
  }
  client_ = std::make_unique<detail::EtcdClient>(std::move(endpoints), options_.requestTimeout,
                                                  options_.backoff, std::move(tls));
  json probe{{"key", base64Encode(options_.prefix.empty() ? std::string(1, '\0') : options_.prefix)},
             {"count_only", true}};
  client_->post("/v3/kv/range", probe, retryDeadline(), "connect");
}

EtcdStore::~EtcdStore() = default;

void EtcdStore::set(const std::string& key, const std::string& value) {
  json put{{"key", base64Encode(fullKey(key))}, {"value", base64Encode(value)}};
  client_->post("/v3/kv/put", put, retryDeadline(), "put " + fullKey(key));
}

EtcdStore::Snapshot EtcdStore::readAll(const std::vector<std::string>& keys,
                                       Clock::time_point deadline, bool countOnly) {
  Snapshot snapshot;
  snapshot.values.resize(keys.size());
  for (std::size_t begin = 0; begin < keys.size(); begin += kMaxTxnOps) {
    const std::size_t end = std::min(keys.size(), begin + kMaxTxnOps);
    json success = json::array();
    for (std::size_t i = begin; i < end; ++i) success.push_back(rangeOp(fullKey(keys[i]), countOnly));
    json reply = client_->post("/v3/kv/txn", json{{"success", success}}, deadline,
                               "read " + joinKeys(keys));
    const json& responses = reply.at("responses");
    if (!responses.is_array() || responses.size() != end - begin) {
      throw ProtocolError("etcd txn answered " + std::to_string(responses.size()) + " ranges for " +
                          std::to_string(end - begin) + " keys");
    }
    // The watch replays from the oldest revision read, so no change between chunks is missed.
    int64_t revision = jsonInt(reply.value("header", json::object()), "revision");
    snapshot.revision = begin == 0 ? revision : std::min(snapshot.revision, revision);
    for (std::size_t i = begin; i < end; ++i) {
      const json& range = responses[i - begin].at("response_range");
      if (countOnly) {
        if (jsonInt(range, "count") > 0) snapshot.values[i] = std::string();
      } else if (const json* kv = firstKv(range)) {
        snapshot.values[i] = valueOf(*kv, fullKey(keys[i]));
      }
    }
  }
  return snapshot;
}

std::vector<std::string> EtcdStore::poll(const std::vector<std::string>& keys,
                                         Clock::time_point deadline, bool countOnly) {
  const Clock::time_point start = Clock::now();
  Backoff delay(BackoffOptions{options_.pollMin, options_.pollMax, 2.0, 0.1});
  std::set<std::string> missing;
  for (const std::string& key : keys) missing.insert(fullKey(key));
  std::string cause;
  while (true) {
    try {
      Snapshot snapshot = readAll(keys, deadline, countOnly);
      missing.clear();
      std::vector<std::string> values;
      for (std::size_t i = 0; i < keys.size(); ++i) {
        if (!snapshot.values[i]) missing.insert(fullKey(keys[i]));
        else values.push_back(std::move(*snapshot.values[i]));
      }
      if (missing.empty()) return values;
      // Sleep until one of them is put; events after the snapshot's revision are replayed.
      std::string begin = options_.prefix.empty() ? std::string(1, '\0') : options_.prefix;
      detail::EtcdWatch watch(client_->currentEndpoint(), client_->tlsContext(), begin,
                              prefixEnd(options_.prefix),
                              snapshot.revision + 1, deadline);
      if (watch.waitForAny(missing, deadline)) {
        delay.reset();
        continue;
      }
    } catch (const NetworkError& e) {
      cause = std::string("; last error: ") + e.what();
    }
    if (!delay.sleepBefore(deadline)) {
      auto waited = std::chrono::duration_cast<std::chrono::milliseconds>(Clock::now() - start);
      throw TimeoutError("timed out after " + std::to_string(waited.count()) + " ms waiting for keys " +
                         joinKeys({missing.begin(), missing.end()}) + " on etcd " + endpoint() + cause);
    }
  }
}

std::string EtcdStore::get(const std::string& key) {
  return poll({key}, Clock::now() + timeout(), false).front();
}

std::vector<std::string> EtcdStore::multiGet(const std::vector<std::string>& keys) {
  if (keys.empty()) return {};
  return poll(keys, Clock::now() + timeout(), false);
}

void EtcdStore::wait(const std::vector<std::string>& keys, std::chrono::milliseconds timeout) {
  if (keys.empty()) return;
  poll(keys, Clock::now() + timeout, true);
}

bool EtcdStore::check(const std::vector<std::string>& keys) {
  if (keys.empty()) return true;
  for (const auto& value : readAll(keys, retryDeadline(), true).values) {
    if (!value) return false;
  }
  return true;
}

template <typename Update>
std::string EtcdStore::modify(const std::string& key, const char* opName, Update update) {
  const Clock::time_point deadline = retryDeadline();
  const std::string full = fullKey(key);
  const std::string what = std::string(opName) + " " + full;
  const std::string encoded = base64Encode(full);
  json range = client_->post("/v3/kv/range", json{{"key", encoded}}, deadline, what);
  const std::string tag = nextRequestTag();
  const int64_t lease = markerLease();
  while (true) {
    const json* kv = firstKv(range);
    std::optional<std::string> current;
    json compare;
    if (kv != nullptr) {
      current = valueOf(*kv, full);
      compare = {{"key", encoded}, {"target", "MOD"}, {"mod_revision", std::to_string(jsonInt(*kv, "mod_revision"))}};
    } else {
      compare = {{"key", encoded}, {"target", "CREATE"}, {"create_revision", "0"}};
    }
    std::string next = update(current);
    json txn{{"compare", json::array({compare})},
             {"success", json::array({putOp(full, next), putOp(marker_, tag + next, lease)})},
             {"failure", json::array({rangeOp(full, false), rangeOp(marker_, false)})}};
    json reply = client_->post("/v3/kv/txn", txn, deadline, what);
    if (reply.value("succeeded", false)) return next;
    // An attempt whose reply was lost had applied it: its result, not a second application.
    if (auto done = appliedBefore(reply, 1, marker_, tag)) return *done;
    // Another client changed the key first: go again from the value the failure branch read.
    range = reply.at("responses").at(0).at("response_range");
    if (Clock::now() >= deadline) {
      throw NetworkError("etcd " + what + ": still contended after " +
                         std::to_string(options_.retryTimeout.count()) + " ms");
    }
  }
}

int64_t EtcdStore::add(const std::string& key, int64_t delta) {
  std::string next = modify(key, "add", [&](const std::optional<std::string>& current) {
    return std::to_string(parseCounter(fullKey(key), current.value_or("")) + delta);
  });
  return parseCounter(fullKey(key), next);
}

void EtcdStore::append(const std::string& key, const std::string& value) {
  modify(key, "append", [&](const std::optional<std::string>& current) {
    return current.value_or("") + value;
  });
}

std::string EtcdStore::compareSet(const std::string& key, const std::string& expected,
                                  const std::string& desired) {
  const Clock::time_point deadline = retryDeadline();
  const std::string full = fullKey(key);
  const std::string encoded = base64Encode(full);
  const std::string what = "compareSet " + full;
  const std::string tag = nextRequestTag();
  const int64_t lease = markerLease();
  const json marked = putOp(marker_, tag + desired, lease);
  while (true) {
    // A VALUE comparison is false on a missing key, so the failure range tells the cases apart.
    json txn{{"compare", json::array({{{"key", encoded}, {"target", "VALUE"}, {"value", base64Encode(expected)}}})},
             {"success", json::array({putOp(full, desired), marked})},
             {"failure", json::array({rangeOp(full, false), rangeOp(marker_, false)})}};
    json reply = client_->post("/v3/kv/txn", txn, deadline, what);
    if (reply.value("succeeded", false)) return desired;
    if (auto done = appliedBefore(reply, 1, marker_, tag)) return *done;
    const json* kv = firstKv(reply.at("responses").at(0).at("response_range"));
    if (kv != nullptr) return valueOf(*kv, full);
    if (!expected.empty()) return expected;
    json create{{"compare", json::array({{{"key", encoded}, {"target", "CREATE"}, {"create_revision", "0"}}})},
                {"success", json::array({putOp(full, desired), marked})},
                {"failure", json::array({rangeOp(marker_, false)})}};
    json created = client_->post("/v3/kv/txn", create, deadline, what);
    if (created.value("succeeded", false)) return desired;
    if (auto done = appliedBefore(created, 0, marker_, tag)) return *done;
    // Created by someone else in between: compare against what they wrote.
  }
}

bool EtcdStore::deleteKey(const std::string& key) {
  json reply = client_->post("/v3/kv/deleterange", json{{"key", base64Encode(fullKey(key))}},
                             retryDeadline(), "delete " + fullKey(key));
  return jsonInt(reply, "deleted") > 0;
}

int64_t EtcdStore::numKeys() {
  std::string start = options_.prefix.empty() ? std::string(1, '\0') : options_.prefix;
  json range{{"key", base64Encode(start)}, {"range_end", base64Encode(prefixEnd(options_.prefix))},
             {"count_only", true}};
  return jsonInt(client_->post("/v3/kv/range", range, retryDeadline(), "count keys under " + options_.prefix),
                 "count");
}

void EtcdStore::multiSet(const std::vector<std::string>& keys, const std::vector<std::string>& values) {
  if (keys.size() != values.size()) {
    throw std::invalid_argument("multiSet: " + std::to_string(keys.size()) + " keys but " +
                                std::to_string(values.size()) + " values");
  }
  if (keys.empty()) return;
  // etcd refuses a txn that puts one key twice; the last value wins, as with sets in order.
  std::map<std::string, const std::string*> last;
  for (std::size_t i = 0; i < keys.size(); ++i) last[keys[i]] = &values[i];
  const Clock::time_point deadline = retryDeadline();
  json success = json::array();
  for (auto it = last.begin(); it != last.end(); ++it) {
    success.push_back(putOp(fullKey(it->first), *it->second));
    if (success.size() == kMaxTxnOps || std::next(it) == last.end()) {
      client_->post("/v3/kv/txn", json{{"success", success}}, deadline, "multiSet " + joinKeys(keys));
      success = json::array();
    }
  }
}

std::chrono::milliseconds EtcdStore::timeout() const { return std::chrono::milliseconds(timeoutMs_.load()); }

void EtcdStore::setTimeout(std::chrono::milliseconds timeout) { timeoutMs_.store(timeout.count()); }

std::string EtcdStore::endpoint() const { return client_->endpoint(); }

int64_t EtcdStore::markerLease() {
  std::lock_guard<std::mutex> lock(leaseMutex_);
  const auto now = Clock::now();
  if (markerLease_ == 0 || now - markerLeaseAt_ > kMarkerTtl / 2) {
    markerLease_ = grantLease(kMarkerTtl);
    markerLeaseAt_ = now;
  }
  return markerLease_;
}

int64_t EtcdStore::grantLease(std::chrono::seconds ttl) {
  json reply = client_->post("/v3/lease/grant", json{{"TTL", ttl.count()}}, retryDeadline(),
                             "lease grant");
  int64_t id = jsonInt(reply, "ID");
  if (id == 0) throw ProtocolError("etcd lease grant: no lease id in " + reply.dump());
  return id;
}

void EtcdStore::setWithLease(const std::string& key, const std::string& value, int64_t leaseId) {
  json put{{"key", base64Encode(fullKey(key))}, {"value", base64Encode(value)},
           {"lease", std::to_string(leaseId)}};
  client_->post("/v3/kv/put", put, retryDeadline(), "put " + fullKey(key) + " with lease");
}

int64_t EtcdStore::putWithLease(const std::string& key, const std::string& value,
                                std::chrono::seconds ttl) {
  int64_t id = grantLease(ttl);
  setWithLease(key, value, id);
  return id;
}

int64_t EtcdStore::keepAlive(int64_t leaseId) {
  json reply = client_->post("/v3/lease/keepalive", json{{"ID", std::to_string(leaseId)}},
                             retryDeadline(), "lease keepalive");
  auto result = reply.find("result");
  return result == reply.end() ? 0 : std::max<int64_t>(0, jsonInt(*result, "TTL"));
}

void EtcdStore::revokeLease(int64_t leaseId) {
  try {
    client_->post("/v3/lease/revoke", json{{"ID", std::to_string(leaseId)}}, retryDeadline(),
                  "lease revoke");
  } catch (const ProtocolError&) {
    // Unknown or already expired lease (HTTP 404): nothing left to revoke.
  }
}

}  // namespace ddp
