#include "rendezvous/security/peer_owner.hpp"

#include <linux/inet_diag.h>
#include <linux/netlink.h>
#include <linux/sock_diag.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <utility>

#include "rendezvous/security/address_allowlist.hpp"

namespace ddp {
namespace asio = boost::asio;
using asio::ip::tcp;

namespace {

void copyAddress(__be32* out, const asio::ip::address& a) {
  if (a.is_v4()) {
    const auto b = a.to_v4().to_bytes();
    std::memcpy(out, b.data(), b.size());
  } else {
    const auto b = a.to_v6().to_bytes();
    std::memcpy(out, b.data(), b.size());
  }
}

bool sameAddress(const __be32* wire, const asio::ip::address& a) {
  __be32 expected[4] = {0, 0, 0, 0};
  copyAddress(expected, a);
  return std::memcmp(wire, expected, a.is_v4() ? 4 : 16) == 0;
}

// Asks for the socket whose local end is `peer` and whose remote end is `local`. An error text,
// "" once sent.
std::string sendLookup(int fd, uint32_t sequence, int family, const asio::ip::address& localAddr,
                       uint16_t localPort, const asio::ip::address& peerAddr, uint16_t peerPort) {
  struct {
    nlmsghdr header;
    inet_diag_req_v2 body;
  } request{};
  request.header.nlmsg_len = sizeof(request);
  request.header.nlmsg_type = SOCK_DIAG_BY_FAMILY;
  request.header.nlmsg_flags = NLM_F_REQUEST;
  request.header.nlmsg_seq = sequence;
  request.body.sdiag_family = static_cast<__u8>(family);
  request.body.sdiag_protocol = IPPROTO_TCP;
  request.body.idiag_states = ~0U;
  request.body.id.idiag_sport = htons(peerPort);
  request.body.id.idiag_dport = htons(localPort);
  copyAddress(request.body.id.idiag_src, peerAddr);
  copyAddress(request.body.id.idiag_dst, localAddr);
  request.body.id.idiag_cookie[0] = request.body.id.idiag_cookie[1] = INET_DIAG_NOCOOKIE;
  sockaddr_nl kernel{};
  kernel.nl_family = AF_NETLINK;
  if (::sendto(fd, &request, sizeof(request), 0, reinterpret_cast<sockaddr*>(&kernel),
               sizeof(kernel)) < 0) {
    return std::string("sock_diag request: ") + std::strerror(errno);
  }
  return {};
}

// Reads the kernel's answer to the sendLookup() numbered `sequence` (answers to earlier ones, if
// a failure left any, are skipped).
PeerOwner readAnswer(int fd, uint32_t sequence, const asio::ip::address& localAddr,
                     uint16_t localPort) {
  PeerOwner out;
  alignas(nlmsghdr) char buffer[8192];
  const auto* header = reinterpret_cast<const nlmsghdr*>(buffer);
  ssize_t n = -1;
  do {
    n = ::recv(fd, buffer, sizeof(buffer), 0);
  } while ((n < 0 && errno == EINTR) ||
           (n > 0 && NLMSG_OK(header, static_cast<unsigned>(n)) && header->nlmsg_seq != sequence));
  if (n < 0 || !NLMSG_OK(header, static_cast<unsigned>(n))) {
    out.errorNumber = n < 0 ? errno : EPROTO;
    out.error = n < 0 ? std::string("sock_diag answer: ") + std::strerror(errno) : "sock_diag answer truncated";
    return out;
  }
  if (header->nlmsg_type == NLMSG_ERROR) {
    const auto* err = static_cast<const nlmsgerr*>(NLMSG_DATA(header));
    if (err->error == -ENOENT) {
      out.kind = PeerOwner::Kind::kRemote;
    } else {
      out.errorNumber = -err->error;
      out.error = std::string("sock_diag: ") + std::strerror(-err->error);
    }
    return out;
  }
  const auto* msg = static_cast<const inet_diag_msg*>(NLMSG_DATA(header));
  // A lookup that found no connected socket may fall back to a listener on the peer's port
  // number: that is not the peer.
  const bool connected = msg->idiag_state != TCP_LISTEN && msg->idiag_state != TCP_CLOSE &&
                         msg->id.idiag_dport == htons(localPort) &&
                         sameAddress(msg->id.idiag_dst, localAddr);
  out.kind = connected ? PeerOwner::Kind::kLocal : PeerOwner::Kind::kRemote;
  // A TIME_WAIT socket has no owner any more: nobody can vouch for it.
  out.uid = msg->idiag_state == TCP_TIME_WAIT ? static_cast<uid_t>(-1) : msg->idiag_uid;
  return out;
}

int openNetlink() {
  return ::socket(AF_NETLINK, SOCK_DGRAM | SOCK_CLOEXEC, NETLINK_SOCK_DIAG);
}

// An IPv6 form of an IPv4 address (::ffff:a.b.c.d).
asio::ip::address mapped(const asio::ip::address& a) {
  return asio::ip::address(asio::ip::make_address_v6(asio::ip::v4_mapped, a.to_v4()));
}

}  // namespace

PeerOwnerLookup::PeerOwnerLookup() : fd_(openNetlink()), openErrno_(fd_ < 0 ? errno : 0) {}

PeerOwnerLookup::~PeerOwnerLookup() {
  if (fd_ >= 0) ::close(fd_);
}

// One exact lookup in `family` (addresses already in that family's form).
PeerOwner PeerOwnerLookup::lookup(int family, const asio::ip::address& localAddr,
                                  uint16_t localPort, const asio::ip::address& peerAddr,
                                  uint16_t peerPort) {
  if (fd_ < 0) {
    fd_ = openNetlink();
    if (fd_ < 0) {
      const int e = openErrno_ != 0 ? std::exchange(openErrno_, 0) : errno;
      return {PeerOwner::Kind::kUnknown, 0, std::string("netlink socket: ") + std::strerror(e), e};
    }
  }
  openErrno_ = 0;
  const uint32_t sequence = ++sequence_;
  PeerOwner out;
  const std::string error = sendLookup(fd_, sequence, family, localAddr, localPort, peerAddr, peerPort);
  if (!error.empty()) {
    out = {PeerOwner::Kind::kUnknown, 0, error, errno};
  } else {
    out = readAnswer(fd_, sequence, localAddr, localPort);
  }
  if (out.kind == PeerOwner::Kind::kUnknown) {  // a fresh socket for the next lookup
    ::close(fd_);
    fd_ = -1;
  }
  return out;
}

PeerOwner PeerOwnerLookup::owner(const tcp::endpoint& local, const tcp::endpoint& peer) {
  const auto localAddr = unmapped(local.address());
  const auto peerAddr = unmapped(peer.address());
  if (localAddr.is_v4() != peerAddr.is_v4()) return {PeerOwner::Kind::kRemote, 0, {}};
  if (peerAddr.is_v6()) return lookup(AF_INET6, localAddr, local.port(), peerAddr, peer.port());
  PeerOwner v4 = lookup(AF_INET, localAddr, local.port(), peerAddr, peer.port());
  if (v4.kind != PeerOwner::Kind::kRemote) return v4;
  // An IPv6 socket of the peer's process that connected to a v4-mapped address.
  return lookup(AF_INET6, mapped(localAddr), local.port(), mapped(peerAddr), peer.port());
}

PeerOwner localPeerOwner(const tcp::endpoint& local, const tcp::endpoint& peer) {
  PeerOwnerLookup lookup;
  return lookup.owner(local, peer);
}

}  // namespace ddp
