#include "rendezvous/server/detail/store_session.hpp"

#include <utility>

namespace ddp::detail {
namespace asio = boost::asio;

namespace {

std::string endpointString(const SessionStream::Socket& socket) {
  boost::system::error_code ec;
  const auto ep = socket.remote_endpoint(ec);
  if (ec) return "?";
  auto addr = ep.address();
  if (addr.is_v6() && addr.to_v6().is_v4_mapped()) {
    addr = asio::ip::make_address_v4(asio::ip::v4_mapped, addr.to_v6());
  }
  if (addr.is_v6()) return "[" + addr.to_string() + "]:" + std::to_string(ep.port());
  return addr.to_string() + ":" + std::to_string(ep.port());
}

// A gather list of at most this many buffers is kept between writes.
constexpr std::size_t kKeepGather = 16;

}  // namespace

StoreSession::StoreSession(SessionStream stream, std::shared_ptr<ServerCore> core,
                           const PeerIdentity& identity)
    : SessionProtocol(core, endpointString(stream.socket()), identity),
      stream_(std::move(stream)),
      writing_(core->budget) {}

StoreSession::~StoreSession() {
  if (!closed_) drop(core_->counters.open);
  core_->sessions.erase(this);
  if (core_->unauthenticated) {
    core_->unauthenticated->remove(id());
    core_->countUnauthenticated();
  }
}

void StoreSession::start() {
  core_->sessions.insert(this);
  bump(core_->counters.accepted);
  bump(core_->counters.open);
  core_->log->debug("{}: connection {} from {}", core_->options.name, id(), peer());
  if (core_->unauthenticated && !authenticated()) {
    // Bounded until it presents the token; this may close an older stranger to make room.
    core_->unauthenticated->add(id(), *this, peerKey());
    core_->countUnauthenticated();
  }
  readMore();
}

void StoreSession::expel(const std::string& reason) {
  core_->refusals.refused(*core_->log, core_->options.name, peer(), RefusalKind::kUnauthenticated,
                          reason);
  close("");
}

void StoreSession::close(const std::string& reason) {
  if (closed_) return;
  closed_ = true;
  drop(core_->counters.open);
  if (!reason.empty()) {
    core_->warn("closing connection " + std::to_string(id()) + " from " + peer() + " (" +
                std::string(wire::dialectName(dialect())) + "): " + reason);
  } else {
    core_->log->debug("{}: connection {} from {} closed", core_->options.name, id(), peer());
  }
  // A server that stops applies no ON_CLOSE registration: its peers did not go away.
  disconnect(!core_->stopped);
  core_->sessions.erase(this);
  if (core_->unauthenticated) {
    core_->unauthenticated->remove(id());
    core_->countUnauthenticated();
  }
  const bool durable = !core_->journal || core_->journal->durable() >= core_->journal->committed();
  if (!reason.empty() && !writeActive_ && !output().empty() && durable) {
    // Replies to the requests that preceded the bad one, best effort (never blocks), as torch's
    // server would have sent them before failing.
    gather_.clear();
    output().collect(gather_);
    stream_.writeNow(gather_);
  }
  stream_.close();
  if (graceTimer_) graceTimer_->cancel();
}

void StoreSession::readMore() {
  if (readActive_ || stopped() || closeWhenWritten_ || backlogged(writing_.size())) return;
  const auto room = readBuffer();
  if (!room) {
    close(closeReason());
    return;
  }
  readActive_ = true;
  stream_.asyncReadSome(
      asio::buffer(room->data(), room->size()),
      [self = shared_from_this()](const boost::system::error_code& ec, std::size_t n) {
        self->onRead(ec, n);
      });
}

void StoreSession::onRead(const boost::system::error_code& ec, std::size_t n) {
  readActive_ = false;
  if (stopped()) return;
  if (ec) {
    const bool orderly = SessionStream::isEndOfStream(ec);
    close(orderly ? std::string() : "read failed: " + ec.message());
    return;
  }
  if (ambiguous_) {
    ambiguous_ = false;
    graceTimer_->cancel();
  }
  if (follow(received(n))) readMore();
}

bool StoreSession::follow(Outcome outcome) {
  if (outcome == Outcome::kClose) {
    close(closeReason());
    return false;
  }
  if (outcome == Outcome::kCloseWhenWritten) {
    closeWhenWritten_ = true;  // onWrite closes once the refusal is out; nothing more is read
    if (!writeActive_ && output().empty()) close("");
    flush();
    return false;
  }
  if (outcome == Outcome::kAmbiguous) armGraceTimer();
  flush();
  return true;
}

void StoreSession::armGraceTimer() {
  if (ambiguous_) return;
  ambiguous_ = true;
  if (!graceTimer_) graceTimer_ = std::make_unique<asio::steady_timer>(stream_.socket().get_executor());
  graceTimer_->expires_after(core_->options.v1AmbiguityGrace);
  graceTimer_->async_wait([self = shared_from_this()](const boost::system::error_code& ec) {
    if (self->stopped() || ec || !self->ambiguous_) return;
    self->ambiguous_ = false;
    if (self->follow(self->resolveAmbiguity())) self->readMore();
  });
}

void StoreSession::flush() {
  if (writeActive_ || output().empty() || closed_ || awaitingDurable_) return;
  // --data-dir: no reply may reveal a change that a crash could still lose.
  if (core_->journal && !core_->journal->whenDurable([self = shared_from_this()] {
        self->awaitingDurable_ = false;
        if (!self->stopped()) self->flush();
      })) {
    awaitingDurable_ = true;
    return;
  }
  std::swap(writing_, output());
  gather_.clear();
  writing_.collect(gather_);
  writeActive_ = true;
  core_->storeStats.bytesSent += writing_.size();
  stream_.asyncWrite(gather_,
                     [self = shared_from_this()](const boost::system::error_code& ec, std::size_t) {
                       self->onWrite(ec);
                     });
}

void StoreSession::onWrite(const boost::system::error_code& ec) {
  writeActive_ = false;
  if (stopped()) return;
  if (ec) {
    close("write failed: " + ec.message());
    return;
  }
  writing_.clear();
  if (gather_.capacity() > kKeepGather) decltype(gather_)().swap(gather_);
  if (closeWhenWritten_ && output().empty()) return close("");
  flush();
  readMore();
}

}  // namespace ddp::detail
