#include "launcher/cli/rdzv_conf.hpp"

#include <algorithm>
#include <functional>

#include "launcher/cli/cli_values.hpp"
#include "rendezvous/base/duration_text.hpp"
#include "rendezvous/base/error.hpp"

namespace ddp::detail {
namespace {

using std::chrono::milliseconds;
using Apply = std::function<void(const std::string& value, RendezvousSettings&, RdzvConf&)>;

milliseconds positive(const std::string& value) {
  auto d = parseDuration(value);
  if (d.count() <= 0) throw ConfigError("must be > 0");
  return d;
}

std::string nonEmpty(const std::string& value) {
  if (value.empty()) throw ConfigError("must name a file");
  return value;
}

// torchrun's TLS key names (etcd-v2: ca_cert, ssl_cert, ssl_cert_key; legacy etcd: cacert, cert,
// key) and the ddprun key each means; the ddprun key wins when both are given.
const std::vector<std::pair<std::string, std::string>>& tlsAliases() {
  static const std::vector<std::pair<std::string, std::string>> aliases = {
      {"ca_cert", "tls_ca"}, {"cacert", "tls_ca"},         {"ssl_cert", "tls_cert"},
      {"cert", "tls_cert"},  {"ssl_cert_key", "tls_key"}, {"key", "tls_key"}};
  return aliases;
}

// Every key with what it does. "timeout" is handled before the table (it yields to join_timeout).
const std::vector<std::pair<std::string, Apply>>& keyTable() {
  static const std::vector<std::pair<std::string, Apply>> table = {
      {"join_timeout", [](auto& v, auto& s, auto&) { s.joinTimeout = positive(v); }},
      {"last_call_timeout", [](auto& v, auto& s, auto&) { s.lastCallTimeout = parseDuration(v); }},
      {"close_timeout", [](auto& v, auto& s, auto&) { s.closeTimeout = positive(v); }},
      {"heartbeat_timeout", [](auto& v, auto& s, auto&) { s.heartbeatTimeout = positive(v); }},
      {"keep_alive_interval", [](auto& v, auto& s, auto&) { s.keepAliveInterval = positive(v); }},
      {"keep_alive_max_attempt", [](auto& v, auto& s, auto&) { s.keepAliveMaxAttempt = parseInt(v, 1, 1000000); }},
      {"read_timeout", [](auto& v, auto&, auto& c) { c.readTimeout = positive(v); }},
      {"is_host", [](auto& v, auto&, auto& c) { c.isHost = parseConfBool(v); }},
      {"exit_barrier_timeout", [](auto& v, auto&, auto& c) { c.exitBarrierTimeout = positive(v); }},
      {"protocol", [](auto& v, auto&, auto& c) {
         std::string p = v;
         std::transform(p.begin(), p.end(), p.begin(), [](unsigned char ch) { return std::tolower(ch); });
         if (p != "http" && p != "https") throw ConfigError("must be http or https");
         c.protocol = p;
       }},
      {"etcd_prefix", [](auto& v, auto&, auto& c) { c.etcdPrefix = v.back() == '/' ? v : v + "/"; }},
      {"request_timeout", [](auto& v, auto&, auto& c) { c.etcdRequestTimeout = positive(v); }},
      {"retry_timeout", [](auto& v, auto&, auto& c) { c.etcdRetryTimeout = positive(v); }},
      {"store_type", [](auto& v, auto&, auto&) {
         if (v != "tcp") throw ConfigError("only tcp is supported (the store is a TCP store)");
       }},
      {"use_libuv", [](auto& v, auto&, auto&) { parseConfBool(v); }},  // torch's server choice
      {"rank", [](auto& v, auto&, auto&) { parseInt(v, 0, 1 << 30); }},  // torchrun sets it from --node-rank
      {"token_file", [](auto& v, auto&, auto& c) { c.tokenFile = nonEmpty(v); }},
      {"tls_ca", [](auto& v, auto&, auto& c) { c.tls.caFile = nonEmpty(v); }},
      {"tls_cert", [](auto& v, auto&, auto& c) { c.tls.certFile = nonEmpty(v); }},
      {"tls_key", [](auto& v, auto&, auto& c) { c.tls.keyFile = nonEmpty(v); }},
      {"store_allow", [](auto& v, auto&, auto& c) { c.storeAllow = AddressAllowlist::parse(v); }},
      {"store_unverified_local", [](auto& v, auto&, auto& c) {
         if (v != "refuse" && v != "accept") throw ConfigError("must be refuse or accept");
         c.storeAcceptUnverifiedLocal = v == "accept";
       }},
  };
  return table;
}

// The ddprun key `key` stands for (itself unless it is one of torchrun's TLS names).
std::string canonical(const std::string& key) {
  for (const auto& [alias, name] : tlsAliases())
    if (key == alias) return name;
  return key;
}

// TLS is on exactly when tls_ca is given; the other TLS keys and protocol must agree with it.
void resolveTls(const std::map<std::string, std::string>& conf, RdzvConf& c) {
  if (c.tls.certFile.empty() != c.tls.keyFile.empty())
    throw ConfigError("tls_cert and tls_key go together (the client certificate and its key)");
  if (!c.tls.certFile.empty() && !c.tls.enabled())
    throw ConfigError("tls_cert needs tls_ca (the CA that signed the store's certificate)");
  if (conf.contains("protocol") && c.protocol == "https" && !c.tls.enabled())
    throw ConfigError("protocol=https needs tls_ca=<CA file> (the CA that signed etcd's certificate)");
  if (conf.contains("protocol") && c.protocol == "http" && c.tls.enabled())
    throw ConfigError("protocol=http contradicts tls_ca (TLS): drop one of them");
  if (c.tls.enabled()) c.protocol = "https";
}

std::string knownList() {
  std::string list;
  for (const auto& key : rdzvConfKeys()) list += (list.empty() ? "" : ", ") + key;
  return list;
}

void resolveHeartbeat(bool given, RendezvousSettings& s) {
  if (!given) s.heartbeatTimeout = s.keepAliveInterval * s.keepAliveMaxAttempt;
  if (s.heartbeatTimeout > s.keepAliveInterval) return;
  if (given)
    throw ConfigError("heartbeat_timeout=" + durationText(s.heartbeatTimeout) +
                      " must be greater than keep_alive_interval=" + durationText(s.keepAliveInterval) +
                      " (a node is declared lost when silent for heartbeat_timeout; default "
                      "keep_alive_interval x keep_alive_max_attempt)");
  throw ConfigError("keep_alive_max_attempt=" + std::to_string(s.keepAliveMaxAttempt) +
                    " makes heartbeat_timeout equal keep_alive_interval: one late heartbeat would "
                    "end the round; use 2 or more, or set heartbeat_timeout");
}

}  // namespace

const std::vector<std::string>& rdzvConfKeys() {
  static const std::vector<std::string> keys = [] {
    std::vector<std::string> out;
    for (const auto& [key, apply] : keyTable()) out.push_back(key);
    out.insert(out.begin() + 1, "timeout");
    return out;
  }();
  return keys;
}

RendezvousSettings defaultRendezvousSettings(RdzvBackend backend) {
  RendezvousSettings s;
  if (backend == RdzvBackend::kStatic || backend == RdzvBackend::kEtcd)
    s.joinTimeout = std::chrono::seconds(900);
  return s;
}

void applyRdzvConf(const std::map<std::string, std::string>& conf, RendezvousSettings& settings,
                   RdzvConf& out) {
  for (const auto& [key, value] : conf) {
    const std::string name = canonical(key);
    const auto& table = keyTable();
    auto it = std::find_if(table.begin(), table.end(), [&](auto& entry) { return entry.first == name; });
    if (it == table.end() && key != "timeout")
      throw ConfigError("unknown key '" + key + "' (known: " + knownList() + ")");
    // join_timeout (and each tls_* key) wins over its alias whatever the order of the keys.
    if (key == "timeout" && conf.contains("join_timeout")) continue;
    if (name != key && conf.contains(name)) continue;
    try {
      (key == "timeout" ? table.front().second : it->second)(value, settings, out);
    } catch (const ConfigError& e) {
      throw ConfigError(key + "=" + value + ": " + e.what());
    }
  }
  resolveHeartbeat(conf.contains("heartbeat_timeout"), settings);
  resolveTls(conf, out);
  out.connectTimeout = std::min(out.readTimeout, settings.joinTimeout);
}

}  // namespace ddp::detail
