// Rendezvous endpoints: the one parser of `--rdzv-endpoint` / `--master-addr` text and the one table
// of default ports. Everything else reads the resolved LaunchConfig::rdzvEndpoints.
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

#include "launcher/launch_config.hpp"

namespace ddp {

// Default ports, as torchrun: the c10d store, etcd's client port, the static backend's
// --master-port.
inline constexpr int kDefaultC10dPort = 29400;
inline constexpr int kDefaultEtcdPort = 2379;
inline constexpr int kDefaultMasterPort = 29500;

// The port a backend's endpoint gets when the text names none (static: kDefaultMasterPort).
int defaultPortFor(RdzvBackend backend);

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

// "host:port", "[v6]:port".
std::string formatEndpoint(const Endpoint& endpoint);

}  // namespace ddp
