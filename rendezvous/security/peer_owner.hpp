// localPeerOwner: which user owns the other end of an accepted TCP connection, when that end is a
// socket of this machine (in this network namespace) — e.g. another user's process connecting
// over loopback. Remote peers are not visible here.
//
// Asks the kernel with one NETLINK_SOCK_DIAG exact lookup of the peer's socket (what `ss -e`
// reads; no privileges needed): O(1), a few microseconds. PeerOwnerLookup keeps its netlink socket
// open between lookups, so a server that ran out of file descriptors can still tell who connected
// (it opens the socket at construction and again only after a failure).
//
// Thread safety: localPeerOwner() is a pure function (one netlink socket per call); a
// PeerOwnerLookup belongs to one thread (a server's io thread). Both block only on the local
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
  int errorNumber = 0;  // kUnknown: the errno behind `error` (EMFILE: out of descriptors), or 0
};

// Looks up the socket whose local end is `peer` and whose remote end is `local` (the server's
// side of the connection, as accepted).
PeerOwner localPeerOwner(const boost::asio::ip::tcp::endpoint& local,
                         const boost::asio::ip::tcp::endpoint& peer);

// localPeerOwner() over one netlink socket kept open. Tests derive from it to make lookups fail
// on command (the kernel's answer wrapped, as a fake should).
class PeerOwnerLookup {
 public:
  // Opens the netlink socket now (a failure is reported by the first owner() call).
  PeerOwnerLookup();
  virtual ~PeerOwnerLookup();
  PeerOwnerLookup(const PeerOwnerLookup&) = delete;
  PeerOwnerLookup& operator=(const PeerOwnerLookup&) = delete;

  // As localPeerOwner(). After a failure the socket is closed and the next call opens a new one.
  virtual PeerOwner owner(const boost::asio::ip::tcp::endpoint& local,
                          const boost::asio::ip::tcp::endpoint& peer);

 private:
  PeerOwner lookup(int family, const boost::asio::ip::address& localAddr, uint16_t localPort,
                   const boost::asio::ip::address& peerAddr, uint16_t peerPort);

  int fd_ = -1;
  int openErrno_ = 0;
  uint32_t sequence_ = 0;
};

}  // namespace ddp
