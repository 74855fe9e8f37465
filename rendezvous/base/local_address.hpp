// localAddressTowards: the local IP address this host would use to reach a given peer, found by
// connecting an unconnected-by-nature UDP socket (no packet is sent) and reading its local end.
// The agent advertises it as MASTER_ADDR; Gloo workers bind their transport to it.
// loopbackAddress: the loopback address this host has, for what must be reachable from this
// host only (a one-node job's stores): 127.0.0.1, or ::1 on a host without IPv4 loopback.
// interfaceAddresses: this host's own addresses, what other hosts may see its connections come
// from. hostName: this host's name, as logs, node descriptors and file names show it.
//
// Thread safety: pure functions (they block on name resolution or read the interfaces).
#pragma once

#include <netdb.h>

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

namespace ddp {

// Resolves `host` (name or address) and returns the local address, as text, of the interface the
// kernel routes to it through ("127.0.0.1" for a loopback peer). Throws ConfigError when `host`
// does not resolve or no route to it exists.
std::string localAddressTowards(const std::string& host, uint16_t port);

// "127.0.0.1" when a socket can be bound to it, else "::1" when one can be bound to that, else
// "127.0.0.1" (binding it then fails with its own error). Found once per process (a bind to port
// 0 of each, closed at once). Never throws.
std::string loopbackAddress();

// This host's addresses as text, IPv4 and IPv6, without loopback and link-local ones, in
// interface order, at most `limit`. Empty when the interfaces cannot be read. Never throws.
std::vector<std::string> interfaceAddresses(size_t limit);

// This host's name (gethostname), "localhost" when it cannot be read. Does not block; never throws.
std::string hostName();

// The TCP addresses of host:port (both families; `port` numeric), freed with the list: null with
// `error` = "cannot resolve: <why>" when the host does not resolve. Blocks on name resolution.
using AddressList = std::unique_ptr<addrinfo, void (*)(addrinfo*)>;
AddressList resolveTcp(const std::string& host, uint16_t port, std::string& error);

}  // namespace ddp
