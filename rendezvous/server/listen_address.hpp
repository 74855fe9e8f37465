// resolveListenAddress: the address a server of ours listens on (the store server, ddprund's status
// page), from a host as the user wrote it: an IPv4 or IPv6 address ("::", "[::1]") or a name.
//
// Thread safety: reentrant; it blocks on name resolution.
#pragma once

#include <cstdint>
#include <functional>
#include <string>

#include <boost/asio/io_context.hpp>
#include <boost/asio/ip/tcp.hpp>

namespace ddp {

// `host` without the brackets of "[v6]" (unchanged otherwise). Never throws.
std::string withoutBrackets(const std::string& host);

// An address is taken as it is; a name is resolved on `io` (its first result). Throws NetworkError
// "cannot resolve the <what> address '<host>': <why>" when a name does not resolve.
boost::asio::ip::tcp::endpoint resolveListenAddress(boost::asio::io_context& io,
                                                    const std::string& host, uint16_t port,
                                                    const std::string& what);

// Opens `acceptor` (closed first) listening on `endpoint`: SO_REUSEADDR (a restart while old
// connections sit in TIME_WAIT) and never SO_REUSEPORT (a co-located torchrun agent's own bind
// must fail so that it falls back to a client); an IPv6 socket accepts IPv4 too. A kernel without
// IPv6 cannot open the "::" wildcard: then 0.0.0.0, after onIpv4Fallback(why) (may be empty).
// Returns the endpoint listened on; throws NetworkError "cannot listen on <endpoint> (<name>):
// <why>".
boost::asio::ip::tcp::endpoint openListener(
    boost::asio::ip::tcp::acceptor& acceptor, boost::asio::ip::tcp::endpoint endpoint,
    const std::string& name, const std::function<void(const std::string& why)>& onIpv4Fallback);

}  // namespace ddp
