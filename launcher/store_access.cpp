#include "launcher/store_access.hpp"

#include <netdb.h>
#include <sys/socket.h>

#include <vector>

#include <boost/asio/ip/address.hpp>

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
  return round.nodeCount == 1 ? "127.0.0.1" : advertisedAddr;
}

StoreServerOptions workerStoreOptions(const LaunchConfig& config, const RendezvousResult& round,
                                      const std::string& advertisedAddr,
                                      const std::vector<std::string>& memberAddrs) {
  StoreServerOptions options;
  options.name = "worker store gen " + std::to_string(round.generation);
  const std::string addr = workerStoreAddress(round, advertisedAddr);
  options.host = isAddressLiteral(addr) ? addr : "::";
  options.sameUserLocalPeers = true;
  // One node: its workers connect to 127.0.0.1 from 127.0.0.1.
  std::vector<std::string> nodes = {"127.0.0.1"};
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
  options.host = endpoint.host == "localhost" ? "127.0.0.1"
                 : isAddressLiteral(endpoint.host) ? endpoint.host
                                                   : "::";
  options.sameUserLocalPeers = true;
  options.allow = AddressAllowlist::localSubnets();
  addHosts(options.allow, config.slurmHosts, options.name);
  options.allow.add(config.rdzvConf.storeAllow);
  options.token = token;
  return options;
}

}  // namespace ddp
