#include "rendezvous/server/detail/admission.hpp"

#include <unistd.h>

#include <optional>
#include <string>
#include <utility>
#include <vector>

#include <boost/asio/steady_timer.hpp>

#include "rendezvous/security/address_allowlist.hpp"
#include "rendezvous/security/peer_owner.hpp"

namespace ddp::detail {
namespace asio = boost::asio;
using asio::ip::tcp;

namespace {

constexpr unsigned char kTlsHandshakeRecord = 0x16;

std::string peerText(const tcp::endpoint& ep) {
  const auto addr = unmapped(ep.address());
  if (addr.is_v6()) return "[" + addr.to_string() + "]:" + std::to_string(ep.port());
  return addr.to_string() + ":" + std::to_string(ep.port());
}

struct Refusal {
  RefusalKind kind;
  std::string reason;
};

// Why `socket` may not be served, or nullopt.
std::optional<Refusal> refusalFor(ServerCore& core, tcp::socket& socket, const tcp::endpoint& peer) {
  const auto& opts = core.options;
  if (!opts.allow.contains(peer.address())) {
    return Refusal{RefusalKind::kAddress, "address not allowed (allowed: " + opts.allow.describe() + ")"};
  }
  if (!opts.sameUserLocalPeers) return std::nullopt;
  boost::system::error_code ec;
  const tcp::endpoint local = socket.local_endpoint(ec);
  if (ec) return Refusal{RefusalKind::kLocalUser, "cannot read the connection's local address: " + ec.message()};
  const PeerOwner owner = localPeerOwner(local, peer);
  if (owner.kind == PeerOwner::Kind::kUnknown) {
    if (!core.ownerLookupWarned) {
      core.ownerLookupWarned = true;
      core.log->warn("{}: cannot tell which user owns a local connection ({}); local clients are "
                     "accepted by address only",
                     opts.name, owner.error);
    }
    return std::nullopt;
  }
  const uid_t self = ::geteuid();
  if (owner.kind == PeerOwner::Kind::kLocal && owner.uid != self && owner.uid != 0) {
    return Refusal{RefusalKind::kLocalUser, "a local process of another user (uid " +
                                                std::to_string(owner.uid) + "; this store serves uid " +
                                                std::to_string(self) + " only)"};
  }
  return std::nullopt;
}

void startSession(SessionStream stream, const std::shared_ptr<ServerCore>& core) {
  std::make_shared<StoreSession>(std::move(stream), core)->start();
}

}  // namespace

// A connection to a TLS server, from accept until its handshake completed (or it is plain and
// allowed to be).
class TlsAdmission : public std::enable_shared_from_this<TlsAdmission> {
 public:
  TlsAdmission(tcp::socket socket, std::shared_ptr<ServerCore> core, std::string peer)
      : socket_(std::move(socket)), core_(std::move(core)), peer_(std::move(peer)),
        timer_(socket_.get_executor()) {}

  ~TlsAdmission() { core_->handshaking.erase(this); }

  void start() {
    core_->handshaking.insert(this);
    timer_.expires_after(kTlsHandshakeBudget);
    timer_.async_wait([self = shared_from_this()](const boost::system::error_code& ec) {
      if (!ec) self->refuse(RefusalKind::kTls, "no TLS handshake within " + std::to_string(kTlsHandshakeBudget.count()) + " s");
    });
    socket_.async_receive(asio::buffer(&first_, 1), tcp::socket::message_peek,
                          [self = shared_from_this()](const boost::system::error_code& ec,
                                                      std::size_t n) { self->onPeek(ec, n); });
  }

  void cancel() { close(); }

 private:
  void onPeek(const boost::system::error_code& ec, std::size_t n) {
    if (done_) return;
    if (ec || n == 0) return close();  // gone before saying anything
    if (first_ != kTlsHandshakeRecord) return admitPlain();
    tls_ = std::make_unique<SessionStream::TlsStream>(std::move(socket_), *core_->tls);
    tls_->async_handshake(asio::ssl::stream_base::server,
                          [self = shared_from_this()](const boost::system::error_code& e) {
                            self->onHandshake(e);
                          });
  }

  void admitPlain() {
    boost::system::error_code ec;
    const auto remote = socket_.remote_endpoint(ec);
    if (ec || !core_->options.allowUnauthenticated.contains(remote.address())) {
      return refuse(RefusalKind::kPlain, "a plain TCP connection to a TLS server (plain only from addresses allowed "
                    "without a token)");
    }
    finish();
    startSession(SessionStream(std::move(socket_)), core_);
  }

  void onHandshake(const boost::system::error_code& ec) {
    if (done_) return;
    if (ec) return refuse(RefusalKind::kTls, "TLS handshake failed: " + ec.message());
    finish();
    startSession(SessionStream(std::move(tls_)), core_);
  }

  void refuse(RefusalKind kind, const std::string& reason) {
    if (done_) return;
    core_->refusals.refused(*core_->log, core_->options.name, peer_, kind, reason);
    close();
  }

  void finish() {
    done_ = true;
    timer_.cancel();
    core_->handshaking.erase(this);
  }

  void close() {
    finish();
    boost::system::error_code ignored;
    (tls_ ? tls_->next_layer() : socket_).close(ignored);
  }

  tcp::socket socket_;
  std::shared_ptr<ServerCore> core_;
  std::string peer_;
  asio::steady_timer timer_;
  std::unique_ptr<SessionStream::TlsStream> tls_;
  unsigned char first_ = 0;
  bool done_ = false;
};

void admit(tcp::socket socket, const std::shared_ptr<ServerCore>& core) {
  boost::system::error_code ec;
  const tcp::endpoint peer = socket.remote_endpoint(ec);
  if (ec) return;  // already gone
  if (auto refusal = refusalFor(*core, socket, peer)) {
    core->refusals.refused(*core->log, core->options.name, peerText(peer), refusal->kind,
                           refusal->reason);
    socket.close(ec);
    return;
  }
  if (!core->tls) return startSession(SessionStream(std::move(socket)), core);
  std::make_shared<TlsAdmission>(std::move(socket), core, peerText(peer))->start();
}

void cancelAdmissions(ServerCore& core) {
  const std::vector<TlsAdmission*> pending(core.handshaking.begin(), core.handshaking.end());
  for (auto* admission : pending) admission->cancel();
}

}  // namespace ddp::detail
