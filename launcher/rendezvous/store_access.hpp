// StoreAccess: where the stores an agent hosts listen, and whom they serve (docs/security.md).
//
//   Worker store (node rank 0, a fresh one per generation): listens on the loopback address
//   (loopbackAddress(): 127.0.0.1, or ::1 on an IPv6-only host) when the round has one node
//   (MASTER_ADDR is then that address), else on the advertised address (MASTER_ADDR; every
//   address when that is a host name); serves the round's node addresses — each member's
//   advertised address and the interface addresses it reported (NodeDescriptor::interfaceAddrs,
//   so that a node reaching MASTER_ADDR from another interface than the one it advertises is
//   served: multi-NIC hosts), names resolved; the loopback address for one node — and
//   --rdzv-conf store_allow; on this machine, only processes of this agent's user (or root).
//   A node whose connections node rank 0 refuses learns it from probeAdmission()
//   (admission_probe.hpp), asked by its agent beside the preflight checks.
//   Rendezvous store hosted by an agent (static, self-hosted c10d, Slurm node 0): listens on the
//   endpoint's address when it is an IP address (localhost: the loopback address), else on every
//   address (other nodes may resolve the name differently: Debian maps a host's own name to
//   127.0.1.1); serves what ddprund serves by default — loopback and this host's subnets — plus
//   the Slurm step's node addresses (the first 1024 names resolved) and store_allow (it cannot
//   know the nodes' addresses before the round); on this machine, only this user's processes;
//   with token_file, agents must present the token.
//
// Thread safety: pure functions apart from name resolution (getaddrinfo) and reading interfaces.
#pragma once

#include <cstddef>
#include <string>
#include <vector>

#include "rendezvous/base/endpoint.hpp"
#include "launcher/config/launch_config.hpp"
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

// Connections the job may open to the stores one agent hosts: maxNodes x (3 + nproc-per-node)
// (each agent holds up to 3 to the rendezvous store, each worker 1 to the worker store).
std::size_t expectedStoreConnections(const LaunchConfig& config);

// Raises this agent's soft descriptor limit to the hard one (fd_limit.hpp; its workers get the
// limit it started with back). Logs a warning at once when a store it hosts would hold fewer
// connections than expectedStoreConnections(); otherwise adds to config.notes the line saying how
// many it holds (the agent logs its notes at info once it started, so a usage error stays one
// line). Never throws.
void raiseAgentDescriptorLimit(LaunchConfig& config);

}  // namespace ddp
