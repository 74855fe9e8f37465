#include "rendezvous/server/detail/admission.hpp"

#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <optional>
#include <string>
#include <utility>
#include <variant>
#include <vector>

#include <boost/asio/steady_timer.hpp>

#include "rendezvous/security/address_allowlist.hpp"
#include "rendezvous/security/peer_owner.hpp"
#include "rendezvous/server/detail/busy_notice.hpp"

namespace ddp::detail {
namespace asio = boost::asio;
using asio::ip::tcp;

namespace {

constexpr unsigned char kTlsHandshakeRecord = 0x16;
using OtherLocalUsers = StoreServerOptions::OtherLocalUsers;

std::string peerText(const tcp::endpoint& ep) {
  const auto addr = unmapped(ep.address());
  if (addr.is_v6()) return "[" + addr.to_string() + "]:" + std::to_string(ep.port());
  return addr.to_string() + ":" + std::to_string(ep.port());
}

struct Refusal {
  RefusalKind kind;
  std::string reason;
  bool busy = false;  // out of descriptors: the client gets a busy notice saying `reason`
};

using Verdict = std::variant<PeerIdentity, Refusal>;

bool trusted(const StoreServerOptions& opts, uid_t uid) {
  return uid == ::geteuid() || uid == 0 ||
         std::find(opts.trustedUids.begin(), opts.trustedUids.end(), uid) != opts.trustedUids.end();
}

// A local process of another user (`who`), or one whose owner is unknown.
Verdict foreignLocal(const StoreServerOptions& opts, PeerIdentity identity, RefusalKind kind,
                     const std::string& who) {
  if (opts.otherLocalUsers == OtherLocalUsers::kServe) return identity;
  if (opts.otherLocalUsers == OtherLocalUsers::kAuthenticate && !opts.token.empty()) {
    identity.tokenExempt = false;  // its address says nothing about who it is
    return identity;
  }
  const uid_t self = ::geteuid();
  const std::string served = "this store serves uid " + std::to_string(self) +
                             (opts.trustedUids.empty() ? "" : ", the users allowed") +
                             (self == 0 ? "" : " and root");
  return Refusal{kind, who + "; " + served + (opts.otherLocalUsers == OtherLocalUsers::kRefuse
                                                  ? " only)"
                                                  : " only: see --allow-users, --token-file)")};
}

// Who owns a local peer decides (admission.hpp, rule 2).
Verdict judgeOwner(ServerCore& core, tcp::socket& socket, const tcp::endpoint& peer,
                   PeerIdentity identity) {
  const auto& opts = core.options;
  boost::system::error_code ec;
  const tcp::endpoint local = socket.local_endpoint(ec);
  if (ec) return Refusal{RefusalKind::kLocalUser, "cannot read the connection's local address: " + ec.message()};
  const PeerOwner owner = core.peerOwners->owner(local, peer);
  switch (owner.kind) {
    case PeerOwner::Kind::kRemote:
      return identity;
    case PeerOwner::Kind::kLocal:
      identity.key = "uid " + std::to_string(owner.uid);
      if (trusted(opts, owner.uid)) return identity;
      return foreignLocal(opts, identity, RefusalKind::kLocalUser,
                          "a local process of another user (uid " + std::to_string(owner.uid));
    case PeerOwner::Kind::kUnknown:
      break;
  }
  if (owner.errorNumber == EMFILE || owner.errorNumber == ENFILE) {
    return Refusal{RefusalKind::kOverload,
                   "out of file descriptors (RLIMIT_NOFILE " + std::to_string(core.fdLimit) +
                       ") to tell which user owns this local connection (" + owner.error + ")",
                   true};
  }
  if (opts.trustUnknownLocalOwner) return identity;
  return foreignLocal(opts, identity, RefusalKind::kOwnerUnknown,
                      "cannot tell which user owns this local connection (" + owner.error +
                          "), so it counts as another user's (docs/security.md: unverified local "
                          "clients");
}

// May `socket` be served, and as whom?
Verdict verdictFor(ServerCore& core, tcp::socket& socket, const tcp::endpoint& peer) {
  const auto& opts = core.options;
  if (!opts.allow.contains(peer.address())) {
    return Refusal{RefusalKind::kAddress, "address not allowed (allowed: " + opts.allow.describe() + ")"};
  }
  PeerIdentity identity{unmapped(peer.address()).to_string(),
                        opts.allowUnauthenticated.contains(peer.address())};
  if (!core.peerOwners) return identity;
  return judgeOwner(core, socket, peer, std::move(identity));
}

void startSession(SessionStream stream, const std::shared_ptr<ServerCore>& core,
                  const PeerIdentity& identity) {
  std::make_shared<StoreSession>(std::move(stream), core, identity)->start();
}

}  // namespace

// A connection to a TLS server, from accept until its handshake completed (or it is plain and
// allowed to be).
class TlsAdmission : public std::enable_shared_from_this<TlsAdmission> {
 public:
  TlsAdmission(tcp::socket socket, std::shared_ptr<ServerCore> core, std::string peer,
               PeerIdentity identity)
      : socket_(std::move(socket)), core_(std::move(core)), peer_(std::move(peer)),
        identity_(std::move(identity)), timer_(socket_.get_executor()) {}

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
    if (!identity_.tokenExempt) {
      return refuse(RefusalKind::kPlain, "a plain TCP connection to a TLS server (plain only from addresses allowed "
                    "without a token)");
    }
    finish();
    startSession(SessionStream(std::move(socket_)), core_, identity_);
  }

  void onHandshake(const boost::system::error_code& ec) {
    if (done_) return;
    if (ec) return refuse(RefusalKind::kTls, "TLS handshake failed: " + ec.message());
    finish();
    startSession(SessionStream(std::move(tls_)), core_, identity_);
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
  PeerIdentity identity_;
  asio::steady_timer timer_;
  std::unique_ptr<SessionStream::TlsStream> tls_;
  unsigned char first_ = 0;
  bool done_ = false;
};

void admit(tcp::socket socket, const std::shared_ptr<ServerCore>& core) {
  boost::system::error_code ec;
  const tcp::endpoint peer = socket.remote_endpoint(ec);
  if (ec) return;  // already gone
  Verdict verdict = verdictFor(*core, socket, peer);
  if (auto* refusal = std::get_if<Refusal>(&verdict)) {
    core->refusals.refused(*core->log, core->options.name, peerText(peer), refusal->kind,
                           refusal->reason + (refusal->busy ? "; told it so" : ""));
    if (refusal->busy) {
      bump(core->counters.outOfDescriptors);
      ++core->storeStats.outOfDescriptors;
      return sendBusyAndClose(socket, core->options.name + ": " + refusal->reason);
    }
    socket.close(ec);
    return;
  }
  auto& identity = std::get<PeerIdentity>(verdict);
  if (!core->tls) return startSession(SessionStream(std::move(socket)), core, identity);
  std::make_shared<TlsAdmission>(std::move(socket), core, peerText(peer), std::move(identity))
      ->start();
}

void cancelAdmissions(ServerCore& core) {
  const std::vector<TlsAdmission*> pending(core.handshaking.begin(), core.handshaking.end());
  for (auto* admission : pending) admission->cancel();
}

}  // namespace ddp::detail
