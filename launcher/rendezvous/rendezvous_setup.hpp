// RendezvousSetup: the rendezvous store and settings an agent uses, from its LaunchConfig.
//
//   --standalone, or the static backend on one node: an in-process InMemoryStore (nothing
//     listens, nothing to collide with).
//   c10d (and static across nodes): a TcpStoreClient to config.rdzvEndpoints[0]. When the
//     endpoint names this host and nothing listens there yet, this agent hosts a StoreServerThread
//     on that port, as torchrun does; rdzv-conf is_host=true|false forces either choice. An
//     agent-hosted store holds the run id (rendezvousOwnerKey()) and its host's identity
//     (rendezvousHostKey(), thisAgentId()) from the start: when that agent dies, the survivors
//     move the store to the lowest surviving node (store_failover.hpp).
//   etcd, etcd-v2: an EtcdStore over config.rdzvEndpoints and the etcd --rdzv-conf keys.
//
// Connecting says what it waits for: at info after the first failed attempt and every 5 s
// (endpoint, where it came from, attempts, elapsed of budget), and gives up after
// config.rdzvConf.connectTimeout = min(read_timeout, join_timeout) with one line counting the
// attempts by kind (refused, no such host, no answer). main() maps that to exit 1 ("rendezvous
// failed").
//
// Thread safety: a plain holder; the store it owns says its own rule.
#pragma once

#include <memory>
#include <string>

#include "launcher/config/launch_config.hpp"
#include "rendezvous/algorithm/job_snapshot.hpp"
#include "rendezvous/algorithm/rendezvous.hpp"
#include "rendezvous/server/store_server.hpp"
#include "rendezvous/store/store.hpp"

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

// Opens (and maybe hosts) the rendezvous store. Throws NetworkError / TimeoutError naming the
// endpoint when the store cannot be reached or hosted (an "address in use" under Slurm names
// DDP_SLURM_PORT), ConfigError for options EtcdStore rejects, an unreadable token file, TLS files
// that cannot be used, or a store that refuses this agent's token.
RendezvousStoreHandle openRendezvousStore(const LaunchConfig& config);

// Hosts a rendezvous store on `port` (every address) holding `initialKeys`, and connects to it:
// what the successor of a lost store host does (store_failover.hpp). Throws NetworkError when
// the port cannot be bound.
RendezvousStoreHandle hostRendezvousStore(const LaunchConfig& config, uint16_t port,
                                          StoreKeyValues initialKeys);

// Connects to a rendezvous store at host:port within `budget` (connection refused is retried
// until then). Throws TimeoutError / NetworkError.
RendezvousStoreHandle connectRendezvousStore(const LaunchConfig& config, const std::string& host,
                                             uint16_t port, std::chrono::milliseconds budget);

// "<host name>|<pid>" of this agent: what an agent-hosted store says of its host
// (rendezvousHostKey()), matched against the members' NodeDescriptor host and pid.
std::string thisAgentId();

// The address other nodes reach this node at (MASTER_ADDR when it has node rank 0):
// --local-addr, else the loopback address (loopbackAddress(): 127.0.0.1, or ::1 on a host without
// it) for an in-process store, else the local address of the interface
// that routes to the rendezvous endpoint — never a host name that may not resolve elsewhere.
// Falls back to `hostName` (with a warning) only when no route can be found.
std::string advertisedAddress(const LaunchConfig& config, const RendezvousStoreHandle& handle,
                              const std::string& hostName);

// The rendezvous settings the agent passes to makeRendezvous(): config.rdzv (resolved once by the
// command line) with `runId`. Does not throw.
RendezvousSettings rendezvousSettingsFrom(const LaunchConfig& config, const std::string& runId);

// True when `host` names this machine (loopback, the host name, or one of its addresses).
bool isLocalHost(const std::string& host);

}  // namespace ddp
