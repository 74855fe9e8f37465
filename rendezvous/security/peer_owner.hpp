// localPeerOwner: which user owns the other end of an accepted TCP connection, when that end is a
// socket of this machine (in this network namespace) — e.g. another user's process connecting
// over loopback. Remote peers are not visible here.
//
// Asks the kernel with one NETLINK_SOCK_DIAG exact lookup of the peer's socket (what `ss -e`
// reads; no privileges needed): O(1), a few microseconds.
//
// Thread safety: a pure function (one netlink socket per call). Blocks only on that local
// netlink round trip.
#pragma once

#include <sys/types.h>

#include <string>

#include <boost/asio/ip/tcp.hpp>

namespace ddp {

struct PeerOwner {
  enum class Kind {
    kLocal,    // a socket of this machine; `uid` owns it
    kRemote,   // no such socket here: the peer is another machine (or network namespace)
    kUnknown,  // the kernel could not be asked (`error` says why)
  };
  Kind kind = Kind::kUnknown;
  uid_t uid = 0;
  std::string error;
};

// Looks up the socket whose local end is `peer` and whose remote end is `local` (the server's
// side of the connection, as accepted).
PeerOwner localPeerOwner(const boost::asio::ip::tcp::endpoint& local,
                         const boost::asio::ip::tcp::endpoint& peer);

}  // namespace ddp
