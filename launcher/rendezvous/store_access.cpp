#include "launcher/rendezvous/store_access.hpp"

#include <netdb.h>
#include <sys/socket.h>

#include <algorithm>
#include <vector>

#include <boost/asio/ip/address.hpp>

#include "rendezvous/base/local_address.hpp"
#include "rendezvous/base/fd_limit.hpp"
#include "rendezvous/base/logging.hpp"

namespace ddp {
namespace {

bool isAddressLiteral(const std::string& host) {
  boost::system::error_code ec;
  boost::asio::ip::make_address(host, ec);
  return !ec;
}

// Adds every address `host` resolves to; false when it resolves to none.
bool addResolved(AddressAllowlist& list, const std::string& host) {
  boost::system::error_code ec;
  const auto literal = boost::asio::ip::make_address(host, ec);
  if (!ec) {
    list.add(literal);
    return true;
  }
  addrinfo hints{};
  hints.ai_family = AF_UNSPEC;
  hints.ai_socktype = SOCK_STREAM;
  addrinfo* res = nullptr;
  if (::getaddrinfo(host.c_str(), nullptr, &hints, &res) != 0) return false;
  bool any = false;
  for (addrinfo* it = res; it != nullptr; it = it->ai_next) {
    char text[NI_MAXHOST] = {0};
    if (::getnameinfo(it->ai_addr, it->ai_addrlen, text, sizeof(text), nullptr, 0, NI_NUMERICHOST) != 0)
      continue;
    const auto addr = boost::asio::ip::make_address(text, ec);
    if (ec) continue;
    list.add(addr);
    any = true;
  }
  ::freeaddrinfo(res);
  return any;
}

// Most host names resolved for one store: a huge Slurm node list must not stall the start of
// node 0 on DNS (nodes on this host's subnets are served anyway).
constexpr std::size_t kMaxResolvedHosts = 1024;

// Adds the addresses of `hosts`, warning once about those that do not resolve.
void addHosts(AddressAllowlist& list, const std::vector<std::string>& hosts, const std::string& what) {
  std::string unresolved;
  for (std::size_t i = 0; i < hosts.size() && i < kMaxResolvedHosts; ++i) {
    if (!addResolved(list, hosts[i])) unresolved += (unresolved.empty() ? "" : ", ") + hosts[i];
  }
  if (hosts.size() > kMaxResolvedHosts) {
    logger("agent")->info("{}: {} hosts; the first {} are served by address, the others only from "
                          "this host's subnets or --rdzv-conf store_allow",
                          what, hosts.size(), kMaxResolvedHosts);
  }
  if (!unresolved.empty()) {
    logger("agent")->warn("{}: cannot resolve {}; connections from there are refused (add their "
                          "addresses with --rdzv-conf store_allow=)",
                          what, unresolved);
  }
}

}  // namespace

std::string workerStoreAddress(const RendezvousResult& round, const std::string& advertisedAddr) {
  return round.nodeCount == 1 ? loopbackAddress() : advertisedAddr;
}

StoreServerOptions workerStoreOptions(const LaunchConfig& config, const RendezvousResult& round,
                                      const std::string& advertisedAddr,
                                      const std::vector<std::string>& memberAddrs) {
  StoreServerOptions options;
  options.name = "worker store gen " + std::to_string(round.generation);
  const std::string addr = workerStoreAddress(round, advertisedAddr);
  options.host = isAddressLiteral(addr) ? addr : "::";
  options.otherLocalUsers = StoreServerOptions::OtherLocalUsers::kRefuse;
  options.trustUnknownLocalOwner = config.rdzvConf.storeAcceptUnverifiedLocal;
  // One node: its workers connect to the loopback address from it.
  std::vector<std::string> nodes = {loopbackAddress()};
  if (round.nodeCount > 1) nodes = memberAddrs;
  options.allow = AddressAllowlist();
  addHosts(options.allow, nodes, options.name);
  options.allow.add(config.rdzvConf.storeAllow);
  return options;
}

StoreServerOptions hostedRendezvousStoreOptions(const LaunchConfig& config, const Endpoint& endpoint,
                                                const std::string& token) {
  StoreServerOptions options;
  options.name = "rendezvous store";
  options.port = static_cast<uint16_t>(endpoint.port);
  options.host = endpoint.host == "localhost" ? loopbackAddress()
                 : isAddressLiteral(endpoint.host) ? endpoint.host
                                                   : "::";
  options.otherLocalUsers = StoreServerOptions::OtherLocalUsers::kRefuse;
  options.trustUnknownLocalOwner = config.rdzvConf.storeAcceptUnverifiedLocal;
  options.allow = AddressAllowlist::localSubnets();
  addHosts(options.allow, config.slurmHosts, options.name);
  options.allow.add(config.rdzvConf.storeAllow);
  options.token = token;
  return options;
}

std::size_t expectedStoreConnections(const LaunchConfig& config) {
  constexpr std::size_t kAgentConnections = 3;  // rendezvous, heartbeat, status publisher
  return static_cast<std::size_t>(std::max(config.maxNodes, 1)) *
         (kAgentConnections + static_cast<std::size_t>(std::max(config.nprocPerNode, 1)));
}

void raiseAgentDescriptorLimit(LaunchConfig& config) {
  const FdLimit limit = raiseFdLimit();
  const std::size_t room = connectionRoom(limit.soft);
  const std::size_t expected = expectedStoreConnections(config);
  auto log = logger("agent");
  if (room < expected) {
    log->warn("file descriptors: {}: a store this agent hosts holds about {} connections, fewer "
              "than a job of {} node(s) x {} worker(s) may open to it ({}); raise the hard limit "
              "(ulimit -Hn, systemd LimitNOFILE=)",
              limit.describe(), room, config.maxNodes, config.nprocPerNode, expected);
    return;
  }
  config.notes.push_back("file descriptors: " + limit.describe() +
                         ": a store this agent hosts holds up to " + std::to_string(room) +
                         " connections");
}

}  // namespace ddp
