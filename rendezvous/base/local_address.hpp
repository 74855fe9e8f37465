// localAddressTowards: the local IP address this host would use to reach a given peer, found by
// connecting an unconnected-by-nature UDP socket (no packet is sent) and reading its local end.
// The agent advertises it as MASTER_ADDR; Gloo workers bind their transport to it.
//
// Thread safety: a pure function (blocks on name resolution).
#pragma once

#include <cstdint>
#include <string>

namespace ddp {

// Resolves `host` (name or address) and returns the local address, as text, of the interface the
// kernel routes to it through ("127.0.0.1" for a loopback peer). Throws ConfigError when `host`
// does not resolve or no route to it exists.
std::string localAddressTowards(const std::string& host, uint16_t port);

}  // namespace ddp
