#include "launcher/rendezvous/rendezvous_setup.hpp"

#include <arpa/inet.h>
#include <ifaddrs.h>
#include <netdb.h>
#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <cstring>
#include <functional>
#include <set>
#include <tuple>

#include "rendezvous/base/endpoint.hpp"
#include "launcher/rendezvous/store_access.hpp"
#include "rendezvous/algorithm/job_snapshot.hpp"
#include "rendezvous/base/duration_text.hpp"
#include "rendezvous/base/local_address.hpp"
#include "rendezvous/base/logging.hpp"
#include "rendezvous/security/token.hpp"
#include "rendezvous/store/etcd_store.hpp"
#include "rendezvous/store/in_memory_store.hpp"
#include "rendezvous/store/tcp_store_client.hpp"
#include "rendezvous/wire/wire_codec.hpp"

namespace ddp {
namespace {

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

// The rendezvous store this agent hosts (or none), and the address its own client connects to.
struct HostedStore {
  std::unique_ptr<StoreServerThread> server;
  std::string localHost;
};

// Hosts the store on `port` when asked to, or when the endpoint is this host and the port is free
// (never when TLS is asked for: an agent-hosted store speaks plain TCP only).
HostedStore maybeHost(const LaunchConfig& config, const Endpoint& endpoint, const std::string& token) {
  const bool forced = config.rdzvConf.isHost.value_or(false);
  const bool refused = !config.rdzvConf.isHost.value_or(true);
  if (refused || (!forced && !isLocalHost(endpoint.host))) return {};
  if (config.rdzvConf.tls.enabled()) {
    if (forced) {
      throw ConfigError("is_host=true with tls_ca: a store hosted by an agent speaks plain TCP; "
                        "run ddprund with --tls-cert/--tls-key as the endpoint instead");
    }
    return {};
  }
  StoreServerOptions options = hostedRendezvousStoreOptions(config, endpoint, token);
  // An agent of another run that reaches this store (two jobs on one port) learns it at once.
  options.initialKeys = {{rendezvousOwnerKey(), config.rdzvId},
                         {rendezvousHostKey(), thisAgentId()}};
  const std::string localHost = options.host == "::" ? loopbackAddress() : options.host;
  try {
    return {std::make_unique<StoreServerThread>(options), localHost};
  } catch (const NetworkError& e) {
    if (!forced) {
      logger("agent")->debug("not hosting the rendezvous store ({}); connecting as a client",
                             e.what());
      return {};
    }
    const bool slurm = config.rdzvEndpointSource.starts_with("Slurm");
    throw NetworkError("cannot host the rendezvous store on port " + std::to_string(endpoint.port) +
                       " (" + config.rdzvEndpointSource + "): " + e.what() +
                       (slurm ? "; another job on this node may use that port: set DDP_SLURM_PORT "
                                "to a free port for this job"
                              : ""));
  }
}

// Logs what the connect loop waits for, at info, as it reports (first failure, then every 5 s).
std::function<void(const ConnectProgress&)> connectProgressLog(const LaunchConfig& config) {
  const std::string source = config.rdzvEndpointSource;
  return [source](const ConnectProgress& p) {
    logger("agent")->info(
        "waiting for the rendezvous store at {} (from {}): attempt {} failed ({}); {} of {} "
        "before giving up",
        p.endpoint, source, p.attempts, p.lastFailure, secondsText(p.elapsed), secondsText(p.budget));
  };
}

RendezvousStoreHandle openEtcdStore(const LaunchConfig& config) {
  RendezvousStoreHandle handle;
  EtcdStoreOptions options;
  if (!config.rdzvConf.tokenFile.empty()) {
    throw ConfigError("token_file: etcd does not take ddprun's token; authenticate with a TLS "
                      "client certificate (tls_cert, tls_key) instead");
  }
  options.endpoints = config.rdzvEndpoints;
  options.https = config.rdzvConf.tls.enabled();
  options.tls = config.rdzvConf.tls;
  options.prefix = config.rdzvConf.etcdPrefix;
  options.timeout = config.rdzvConf.readTimeout;
  options.requestTimeout = config.rdzvConf.etcdRequestTimeout;
  options.retryTimeout = config.rdzvConf.etcdRetryTimeout;
  auto store = std::make_unique<EtcdStore>(options);
  handle.connectHeartbeat = [options](std::chrono::milliseconds budget) {
    EtcdStoreOptions own = options;
    own.timeout = budget;
    own.retryTimeout = budget;
    own.requestTimeout = std::min(own.requestTimeout, budget);
    return std::unique_ptr<Store>(std::make_unique<EtcdStore>(own));
  };
  handle.description = "etcd " + store->endpoint();
  handle.endpointHost = config.rdzvEndpoints.front().host;
  handle.endpointPort = static_cast<uint16_t>(config.rdzvEndpoints.front().port);
  handle.store = std::move(store);
  return handle;
}

// The token agents present to the rendezvous store ("" = none: no token_file).
std::string rendezvousToken(const LaunchConfig& config) {
  return config.rdzvConf.tokenFile.empty() ? "" : readTokenFile(config.rdzvConf.tokenFile);
}

// A TcpStoreClient handle to host:port (the agent's own server when `server` is set), its HELLO
// carrying the token when there is one. TLS (tls_*) only to a store no agent hosts (`agentHosted`
// false): a store an agent hosts speaks plain TCP. A reconnect after a restart of the server
// redoes the TLS handshake and the HELLO with the token (TcpStoreClient).
RendezvousStoreHandle tcpHandle(const LaunchConfig& config,
                                std::unique_ptr<StoreServerThread> server, const std::string& host,
                                uint16_t port, std::chrono::milliseconds connectTimeout,
                                std::function<void(const ConnectProgress&)> progress,
                                bool agentHosted) {
  RendezvousStoreHandle handle;
  handle.server = std::move(server);
  TcpStoreClientOptions options;
  options.endpoint = {host, handle.server ? handle.server->port() : port};
  options.connectTimeout = connectTimeout;
  options.timeout = config.rdzvConf.readTimeout;
  options.onConnectProgress = std::move(progress);
  options.token = rendezvousToken(config);
  if (!agentHosted) options.tls = config.rdzvConf.tls;
  // A restarted ddprund (--data-dir) is reconnected to within read_timeout, resuming the call; a
  // store that keeps no data is not waited for (TcpStoreClientOptions::reconnectBudget).
  options.reconnectBudget = config.rdzvConf.readTimeout;
  std::vector<HelloField> hello = {{"client", "ddprun"},
                                   {"host", hostName()},
                                   {"pid", std::to_string(::getpid())},
                                   {"purpose", "agent"}};
  // ON_CLOSE: a join record this agent wrote is withdrawn when its process dies
  // (rendezvous_join.hpp).
  handle.store = connectTcpStore(options, wire::kCapOnClose | wire::kCapRequestId, hello);
  options.onConnectProgress = nullptr;  // the heartbeat thread reports the outage itself
  hello.back().second = "heartbeat";
  handle.connectHeartbeat = [options, hello](std::chrono::milliseconds budget) {
    TcpStoreClientOptions own = options;
    own.connectTimeout = budget;
    own.timeout = budget;
    own.reconnectBudget = budget;  // a restarted ddprund: resumed within the heartbeat budget
    return std::unique_ptr<Store>(
        connectTcpStore(own, wire::kCapOnClose | wire::kCapRequestId, hello));
  };
  handle.endpointHost = host;
  handle.endpointPort = options.endpoint.port;
  return handle;
}

}  // namespace

bool isLocalHost(const std::string& host) {
  if (host == "localhost" || host == hostName()) return true;
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
  const bool oneNode = config.maxNodes == 1;
  if (config.standalone || (config.rdzvBackend == RdzvBackend::kStatic && oneNode)) {
    RendezvousStoreHandle handle;
    auto memory = std::make_unique<InMemoryStore>();
    handle.connectHeartbeat = [shared = memory.get()](std::chrono::milliseconds) {
      return std::unique_ptr<Store>(shared->newHandle());
    };
    handle.store = std::move(memory);
    handle.description = "in-process";
    return handle;
  }
  if (config.rdzvBackend == RdzvBackend::kEtcd || config.rdzvBackend == RdzvBackend::kEtcdV2)
    return openEtcdStore(config);
  const Endpoint& endpoint = config.rdzvEndpoints.at(0);
  HostedStore hosted = maybeHost(config, endpoint, rendezvousToken(config));
  const bool here = hosted.server != nullptr;
  try {
    RendezvousStoreHandle tcp =
        tcpHandle(config, std::move(hosted.server), here ? hosted.localHost : endpoint.host,
                  static_cast<uint16_t>(endpoint.port), config.rdzvConf.connectTimeout,
                  connectProgressLog(config), here);
    tcp.description = formatEndpoint(endpoint) + (here ? " (hosted here)" : "");
    tcp.endpointHost = endpoint.host;
    return tcp;
  } catch (const ConfigError&) {
    throw;
  } catch (const OverloadedError& e) {  // alive, but out of descriptors or connections
    throw OverloadedError("the rendezvous store at " + formatEndpoint(endpoint) + " (from " +
                          config.rdzvEndpointSource + ") is overloaded: " + e.what());
  } catch (const Error& e) {
    throw NetworkError("cannot reach the rendezvous store at " + formatEndpoint(endpoint) +
                       " (from " + config.rdzvEndpointSource + "): " + e.what());
  }
}

RendezvousStoreHandle hostRendezvousStore(const LaunchConfig& config, uint16_t port,
                                          StoreKeyValues initialKeys) {
  // Narrowed as the store it replaces (store_access.hpp), on every address.
  StoreServerOptions options =
      hostedRendezvousStoreOptions(config, Endpoint{"::", port}, rendezvousToken(config));
  options.initialKeys = std::move(initialKeys);
  auto server = std::make_unique<StoreServerThread>(options);
  RendezvousStoreHandle handle = tcpHandle(config, std::move(server), loopbackAddress(), port,
                                           config.rdzvConf.connectTimeout, {}, true);
  handle.description = "port " + std::to_string(port) + " (hosted here)";
  handle.endpointHost = loopbackAddress();
  return handle;
}

RendezvousStoreHandle connectRendezvousStore(const LaunchConfig& config, const std::string& host,
                                             uint16_t port, std::chrono::milliseconds budget) {
  RendezvousStoreHandle handle = tcpHandle(config, nullptr, host, port, budget, {}, true);
  handle.description = host + ":" + std::to_string(port);
  return handle;
}

std::string thisAgentId() { return hostName() + "|" + std::to_string(::getpid()); }

std::string advertisedAddress(const LaunchConfig& config, const RendezvousStoreHandle& handle,
                              const std::string& hostName) {
  if (!config.localAddr.empty()) return config.localAddr;
  if (handle.endpointHost.empty()) return loopbackAddress();
  try {
    return localAddressTowards(handle.endpointHost, handle.endpointPort);
  } catch (const ConfigError& e) {
    logger("agent")->warn("no route to the rendezvous endpoint {} ({}); advertising host name {}",
                          handle.endpointHost, e.what(), hostName);
    return hostName;
  }
}

RendezvousSettings rendezvousSettingsFrom(const LaunchConfig& config, const std::string& runId) {
  RendezvousSettings s = config.rdzv;
  s.runId = runId;
  return s;
}

}  // namespace ddp
