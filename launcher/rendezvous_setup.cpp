#include "launcher/rendezvous_setup.hpp"

#include <arpa/inet.h>
#include <ifaddrs.h>
#include <netdb.h>
#include <unistd.h>

#include <algorithm>
#include <cstring>
#include <set>
#include <tuple>

#include "rendezvous/etcd_store.hpp"
#include "rendezvous/in_memory_store.hpp"
#include "rendezvous/local_address.hpp"
#include "rendezvous/logging.hpp"
#include "rendezvous/tcp_store_client.hpp"

namespace ddp {
namespace {

constexpr uint16_t kDefaultC10dPort = 29400;

std::string numericAddress(const sockaddr* sa) {
  char buf[INET6_ADDRSTRLEN] = {0};
  const socklen_t len = sa->sa_family == AF_INET6 ? sizeof(sockaddr_in6) : sizeof(sockaddr_in);
  if (::getnameinfo(sa, len, buf, sizeof(buf), nullptr, 0, NI_NUMERICHOST) != 0) return "";
  return buf;
}

std::set<std::string> localAddresses() {
  std::set<std::string> out;
  ifaddrs* list = nullptr;
  if (::getifaddrs(&list) != 0) return out;
  for (ifaddrs* it = list; it != nullptr; it = it->ifa_next) {
    if (it->ifa_addr == nullptr) continue;
    if (it->ifa_addr->sa_family != AF_INET && it->ifa_addr->sa_family != AF_INET6) continue;
    out.insert(numericAddress(it->ifa_addr));
  }
  ::freeifaddrs(list);
  return out;
}

std::string thisHostName() {
  char buf[256] = {0};
  ::gethostname(buf, sizeof(buf) - 1);
  return buf;
}

// Hosts the store on `port` when asked to, or when the endpoint is this host and the port is free.
std::unique_ptr<StoreServerThread> maybeHost(const LaunchConfig& config, const std::string& host,
                                             uint16_t port) {
  const bool forced = config.rdzv.isHost.value_or(false);
  const bool refused = !config.rdzv.isHost.value_or(true);
  if (refused || (!forced && !isLocalHost(host))) return nullptr;
  StoreServerOptions options;
  options.port = port;
  options.name = "rendezvous store";
  // An agent of another run that reaches this store (two jobs on one port) learns it at once.
  options.initialKeys = {{rendezvousOwnerKey(), config.rdzvId}};
  try {
    return std::make_unique<StoreServerThread>(options);
  } catch (const NetworkError& e) {
    if (forced) throw;
    logger("agent")->debug("not hosting the rendezvous store ({}); connecting as a client",
                           e.what());
    return nullptr;
  }
}

}  // namespace

std::pair<std::string, uint16_t> splitEndpoint(const std::string& endpoint, uint16_t defaultPort) {
  std::string host = endpoint, port;
  if (!endpoint.empty() && endpoint.front() == '[') {
    const auto close = endpoint.find(']');
    if (close == std::string::npos) throw ConfigError("bad endpoint '" + endpoint + "'");
    host = endpoint.substr(1, close - 1);
    if (close + 1 < endpoint.size() && endpoint[close + 1] == ':')
      port = endpoint.substr(close + 2);
  } else if (std::count(endpoint.begin(), endpoint.end(), ':') == 1) {
    host = endpoint.substr(0, endpoint.find(':'));
    port = endpoint.substr(endpoint.find(':') + 1);
  }
  if (host.empty()) throw ConfigError("endpoint '" + endpoint + "' has no host");
  if (port.empty()) return {host, defaultPort};
  try {
    const int value = std::stoi(port);
    if (value < 1 || value > 65535 || std::to_string(value) != port) throw std::out_of_range(port);
    return {host, static_cast<uint16_t>(value)};
  } catch (const std::exception&) {
    throw ConfigError("endpoint '" + endpoint + "' has a bad port '" + port + "'");
  }
}

bool isLocalHost(const std::string& host) {
  if (host == "localhost" || host == thisHostName()) return true;
  addrinfo hints{};
  hints.ai_family = AF_UNSPEC;
  addrinfo* res = nullptr;
  if (::getaddrinfo(host.c_str(), nullptr, &hints, &res) != 0) return false;
  const auto mine = localAddresses();
  bool local = false;
  for (addrinfo* it = res; it != nullptr && !local; it = it->ai_next) {
    local = mine.count(numericAddress(it->ai_addr)) > 0;
  }
  ::freeaddrinfo(res);
  return local;
}

RendezvousStoreHandle openRendezvousStore(const LaunchConfig& config) {
  RendezvousStoreHandle handle;
  const bool oneNode = config.maxNodes == 1;
  if (config.standalone || (config.rdzvBackend == RdzvBackend::kStatic && oneNode)) {
    handle.store = std::make_unique<InMemoryStore>();
    handle.description = "in-process";
    return handle;
  }
  if (config.rdzvBackend == RdzvBackend::kEtcd) {
    // etcd (alias etcd-v2): the endpoint list and protocol/etcd_prefix/request_timeout/
    // retry_timeout come from --rdzv-endpoint/--rdzv-conf; nothing is hosted here.
    EtcdStoreOptions options = etcdStoreOptionsFor(config.rdzvEndpoint, config.rdzvConf);
    options.timeout = config.rdzv.readTimeout;
    auto store = std::make_unique<EtcdStore>(options);
    handle.description = "etcd " + store->endpoint();
    std::tie(handle.endpointHost, handle.endpointPort) =
        splitEndpoint(config.rdzvEndpoint.substr(0, config.rdzvEndpoint.find(',')), 2379);
    handle.store = std::move(store);
    return handle;
  }
  const bool isStatic = config.rdzvBackend == RdzvBackend::kStatic;
  std::string host = config.rdzvHost;
  uint16_t port = static_cast<uint16_t>(config.rdzvPort);
  if (host.empty()) {
    const std::string endpoint =
        isStatic ? config.masterAddr + ":" + std::to_string(config.masterPort.value_or(29500))
                 : config.rdzvEndpoint;
    if (endpoint.empty()) throw ConfigError("--rdzv-endpoint is required with --rdzv-backend=c10d");
    std::tie(host, port) = splitEndpoint(endpoint, kDefaultC10dPort);
  }
  handle.server = maybeHost(config, host, port);
  TcpStoreClientOptions options;
  options.host = handle.server ? "127.0.0.1" : host;
  options.port = handle.server ? handle.server->port() : port;
  options.connectTimeout = config.rdzv.joinTimeout;
  options.timeout = config.rdzv.readTimeout;
  handle.store = std::make_unique<TcpStoreClient>(options);
  handle.description = host + ":" + std::to_string(port) + (handle.server ? " (hosted here)" : "");
  handle.endpointHost = host;
  handle.endpointPort = port;
  return handle;
}

std::string advertisedAddress(const LaunchConfig& config, const RendezvousStoreHandle& handle,
                              const std::string& hostName) {
  if (!config.localAddr.empty()) return config.localAddr;
  if (handle.endpointHost.empty()) return "127.0.0.1";
  try {
    return localAddressTowards(handle.endpointHost, handle.endpointPort);
  } catch (const ConfigError& e) {
    logger("agent")->warn("no route to the rendezvous endpoint {} ({}); advertising host name {}",
                          handle.endpointHost, e.what(), hostName);
    return hostName;
  }
}

std::chrono::milliseconds rdzvConfSeconds(const LaunchConfig& config, const std::string& key,
                                          std::chrono::milliseconds fallback) {
  auto it = config.rdzvConf.find(key);
  if (it == config.rdzvConf.end()) return fallback;
  try {
    std::size_t used = 0;
    const double seconds = std::stod(it->second, &used);
    if (used != it->second.size() || seconds < 0) throw std::invalid_argument(it->second);
    return std::chrono::milliseconds(static_cast<int64_t>(seconds * 1000));
  } catch (const std::exception&) {
    throw ConfigError("--rdzv-conf " + key + "=" + it->second + " is not a number of seconds");
  }
}

RendezvousSettings rendezvousSettingsFrom(const LaunchConfig& config, const std::string& runId) {
  RendezvousSettings s;
  s.runId = runId;
  s.minNodes = config.minNodes;
  s.maxNodes = config.maxNodes;
  s.maxRestarts = config.maxRestarts;
  s.joinTimeout = config.rdzv.joinTimeout;
  s.lastCallTimeout = config.rdzv.lastCallTimeout;
  s.closeTimeout = config.rdzv.closeTimeout;
  s.keepAliveInterval = config.rdzv.keepAliveInterval;
  s.keepAliveMaxAttempt = config.rdzv.keepAliveMaxAttempt;
  s.heartbeatTimeout = config.rdzv.heartbeatTimeout;
  return s;
}

}  // namespace ddp
