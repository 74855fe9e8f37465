// StoreAccess: where the stores an agent hosts listen, and whom they serve (README "Security").
//
//   Worker store (node rank 0, a fresh one per generation): listens on 127.0.0.1 when the round
//   has one node (MASTER_ADDR is then 127.0.0.1), else on the advertised address (MASTER_ADDR;
//   every address when that is a host name); serves the round's node addresses (each member's
//   advertised address, names resolved; 127.0.0.1 for one node) and --rdzv-conf store_allow; on this machine, only
//   processes of this agent's user (or root).
//   Rendezvous store hosted by an agent (static, self-hosted c10d, Slurm node 0): listens on the
//   endpoint's address when it is an IP address (localhost: 127.0.0.1), else on every address
//   (other nodes may resolve the name differently: Debian maps a host's own name to 127.0.1.1);
//   serves what ddprund serves by default — loopback and this host's subnets — plus the Slurm
//   step's node addresses (the first 1024 names resolved) and store_allow (it cannot know the nodes' addresses before the round);
//   on this machine, only this user's processes; with token_file, agents must present the token.
//
// Thread safety: pure functions apart from name resolution (getaddrinfo) and reading interfaces.
#pragma once

#include <string>
#include <vector>

#include "launcher/launch_config.hpp"
#include "launcher/rdzv_endpoint.hpp"
#include "rendezvous/algorithm/rendezvous.hpp"
#include "rendezvous/server/store_server.hpp"

namespace ddp {

// MASTER_ADDR of generation `round`'s worker store, hosted by node rank 0 advertising
// `advertisedAddr`.
std::string workerStoreAddress(const RendezvousResult& round, const std::string& advertisedAddr);

// The worker store's options for `round` (name, address, who it serves). `memberAddrs`: the
// round's nodes' advertised addresses (Rendezvous::memberAddresses(); unused for one node). Never
// throws; a member address that does not resolve is left out with a warning (its workers would be
// refused).
StoreServerOptions workerStoreOptions(const LaunchConfig& config, const RendezvousResult& round,
                                      const std::string& advertisedAddr,
                                      const std::vector<std::string>& memberAddrs);

// The options of the rendezvous store this agent hosts at `endpoint`, requiring `token` when
// non-empty.
StoreServerOptions hostedRendezvousStoreOptions(const LaunchConfig& config, const Endpoint& endpoint,
                                                const std::string& token);

}  // namespace ddp
