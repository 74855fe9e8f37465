// Endpoint: a (host, port) a store or daemon listens on, the one table of default ports, the one
// parser of endpoint text and the one way to print one. ddprun's command line parses
// `--rdzv-endpoint` / `--master-addr` once (LaunchConfig::rdzvEndpoints); everything after it takes
// Endpoint values, never text.
//
// Grammar (torch's parse_rendezvous_endpoint): "host", "host:port", "[v6]" or "[v6]:port"; the
// host is letters, digits, '.', '-', '_' or ':' (a bare IPv6 literal has no port); the port is
// 0..65535. etcd takes a comma list of them, each optionally prefixed "http://".
//
// Thread safety: pure functions over constant tables.
#pragma once

#include <optional>
#include <string>
#include <vector>

namespace ddp {

// A host and a port. `host` is a name or an address, an IPv6 address without brackets; `port` is
// 0..65535, 0 = any free port (a server that listens on one; never a place to connect to).
struct Endpoint {
  std::string host;
  int port = 0;
  bool operator==(const Endpoint&) const = default;
};

// Default ports, as torchrun: the c10d store (ddprun's hosted store, ddprund, TcpStoreClient),
// etcd's client port, the static backend's --master-port.
inline constexpr int kDefaultC10dPort = 29400;
inline constexpr int kDefaultEtcdPort = 2379;
inline constexpr int kDefaultMasterPort = 29500;

// Parses one endpoint. A missing port is `defaultPort`, or a ConfigError ("the port is missing")
// when defaultPort is nullopt. Empty text is a ConfigError (callers decide what empty means).
// Messages say what was expected, without the flag (the caller names it).
Endpoint parseEndpoint(const std::string& text, std::optional<int> defaultPort);

// A comma list of endpoints for etcd ("h1:2379,h2", each optionally "http://" or "https://", which
// are dropped: TLS is on for all of them exactly when --rdzv-conf tls_ca is given). At least one
// endpoint.
std::vector<Endpoint> parseEndpointList(const std::string& text, int defaultPort);

// A host alone (--master-addr): a name, an IPv4 address, or an IPv6 address with or without
// brackets; returned without brackets. Throws ConfigError.
std::string parseHost(const std::string& text);

// "host:port", "[v6]:port" (an IPv6 host already in brackets is printed as it is). Never throws.
std::string formatEndpoint(const Endpoint& endpoint);

// The same for a socket's endpoint (boost::asio::ip::tcp::endpoint, or anything with address() and
// port()), without this header depending on Asio.
template <class SocketEndpoint>
std::string formatSocketEndpoint(const SocketEndpoint& endpoint) {
  return formatEndpoint(Endpoint{endpoint.address().to_string(), endpoint.port()});
}

}  // namespace ddp
