// RendezvousSetup: the rendezvous store and settings an agent uses, from its LaunchConfig.
//
//   --standalone, or the static backend on one node: an in-process InMemoryStore (nothing
//     listens, nothing to collide with).
//   c10d (and static across nodes): a TcpStoreClient to --rdzv-endpoint (static:
//     --master-addr:--master-port; the parsed rdzvHost/rdzvPort when set). When the endpoint names
//     this host and nothing listens there yet, this agent hosts a StoreServerThread on that port,
//     as torchrun does; rdzv-conf is_host=true|false forces either choice.
//
// Thread safety: a plain holder; the store it owns says its own rule.
#pragma once

#include <chrono>
#include <memory>
#include <string>

#include "launcher/launch_config.hpp"
#include "rendezvous/rendezvous.hpp"
#include "rendezvous/store.hpp"
#include "rendezvous/store_server.hpp"

namespace ddp {

struct RendezvousStoreHandle {
  std::unique_ptr<StoreServerThread> server;  // set when this agent hosts the store
  std::unique_ptr<Store> store;
  std::string description;  // "in-process", "host:port (hosted here)", ...
  // The endpoint the other nodes use too (empty for an in-process store): the agent advertises
  // the local address that routes there.
  std::string endpointHost;
  uint16_t endpointPort = 0;
  // Opens the rendezvous heartbeat thread's own connection to the same store (a second
  // InMemoryStore handle, EtcdStore or TcpStoreClient; the last says HELLO for ON_CLOSE).
  StoreConnector connectHeartbeat;
};

// Opens (and maybe hosts) the rendezvous store. Throws ConfigError for a bad endpoint or an
// unsupported backend, NetworkError / TimeoutError when the store cannot be reached.
RendezvousStoreHandle openRendezvousStore(const LaunchConfig& config);

// The address other nodes reach this node at (MASTER_ADDR when it has node rank 0):
// --local-addr, else 127.0.0.1 for an in-process store, else the local address of the interface
// that routes to the rendezvous endpoint — never a host name that may not resolve elsewhere.
// Falls back to `hostName` (with a warning) only when no route can be found.
std::string advertisedAddress(const LaunchConfig& config, const RendezvousStoreHandle& handle,
                              const std::string& hostName);

// RendezvousSettings from the flags and the typed --rdzv-conf values. Does not throw.
RendezvousSettings rendezvousSettingsFrom(const LaunchConfig& config, const std::string& runId);

// A duration in seconds from --rdzv-conf `key` (fallback when absent). Throws ConfigError.
std::chrono::milliseconds rdzvConfSeconds(const LaunchConfig& config, const std::string& key,
                                          std::chrono::milliseconds fallback);

// Splits "host[:port]" / "[v6]:port"; port = defaultPort when absent. Throws ConfigError.
std::pair<std::string, uint16_t> splitEndpoint(const std::string& endpoint, uint16_t defaultPort);

// True when `host` names this machine (loopback, the host name, or one of its addresses).
bool isLocalHost(const std::string& host);

}  // namespace ddp
