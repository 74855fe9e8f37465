#include "rendezvous/server/detail/store_session.hpp"

#include <algorithm>
#include <cstring>
#include <utility>

#include "rendezvous/security/address_allowlist.hpp"

namespace ddp::detail {
namespace asio = boost::asio;

namespace {

// Free space offered to each read; pipelined small requests of many clients fit easily.
constexpr std::size_t kReadChunk = 16 * 1024;
// Buffers grown past this (a large value) are released once drained.
constexpr std::size_t kShrinkAbove = 4 * 1024 * 1024;
// Stop reading from a client that does not read its replies once this much output is pending.
constexpr std::size_t kMaxOutputBacklog = 64 * 1024 * 1024;

std::string endpointString(const asio::ip::tcp::endpoint& ep) {
  auto addr = ep.address();
  if (addr.is_v6() && addr.to_v6().is_v4_mapped()) {
    addr = asio::ip::make_address_v4(asio::ip::v4_mapped, addr.to_v6());
  }
  if (addr.is_v6()) return "[" + addr.to_string() + "]:" + std::to_string(ep.port());
  return addr.to_string() + ":" + std::to_string(ep.port());
}

// A client-chosen string for a log line: printable ASCII only, at most 64 characters.
std::string printable(std::string_view text) {
  constexpr std::size_t kMax = 64;
  std::string out;
  for (std::size_t i = 0; i < text.size() && i < kMax; ++i) {
    const auto c = static_cast<unsigned char>(text[i]);
    out += c >= 0x20 && c < 0x7f ? static_cast<char>(c) : '?';
  }
  return text.size() > kMax ? out + "..." : out;
}

}  // namespace

namespace {

bool exemptFromToken(const ServerCore& core, asio::ip::tcp::socket& socket) {
  boost::system::error_code ec;
  const auto remote = socket.remote_endpoint(ec);
  return !ec && core.options.allowUnauthenticated.contains(remote.address());
}

}  // namespace

StoreSession::StoreSession(SessionStream stream, std::shared_ptr<ServerCore> core)
    : stream_(std::move(stream)),
      core_(std::move(core)),
      graceTimer_(stream_.socket().get_executor()),
      decoder_(core_->options.limits, core_->options.legacyDialect),
      auth_(core_->options.token, exemptFromToken(*core_, stream_.socket())) {
  boost::system::error_code ec;
  const auto remote = stream_.socket().remote_endpoint(ec);
  peer_ = ec ? std::string("?") : endpointString(remote);
  id_ = core_->nextSessionId++;
}

StoreSession::~StoreSession() {
  if (!closed_) applyOnClose(core_->state.disconnect(*this, !core_->stopped));
  core_->sessions.erase(this);
}

void StoreSession::start() {
  core_->sessions.insert(this);
  core_->log->debug("{}: connection {} from {}", core_->options.name, id_, peer_);
  readMore();
}

void StoreSession::close(const std::string& reason) {
  if (closed_) return;
  closed_ = true;
  if (!reason.empty()) {
    core_->log->warn("{}: closing connection {} from {} ({}): {}", core_->options.name, id_, peer_,
                     wire::dialectName(decoder_.dialect()), reason);
  } else {
    core_->log->debug("{}: connection {} from {} closed", core_->options.name, id_, peer_);
  }
  // A server that stops applies no ON_CLOSE registration: its peers did not go away.
  applyOnClose(core_->state.disconnect(*this, !core_->stopped));
  core_->sessions.erase(this);
  if (!reason.empty() && !writeActive_ && !out_.empty()) {
    // Replies to the requests that preceded the bad one, best effort (never blocks), as torch's
    // server would have sent them before failing.
    stream_.writeNow(asio::buffer(out_));
  }
  stream_.close();
  graceTimer_.cancel();
}

void StoreSession::applyOnClose(const std::vector<AppliedOnClose>& applied) {
  for (const auto& a : applied) {
    core_->log->info("{}: connection {} from {}{} closed; its ON_CLOSE {} '{}'",
                     core_->options.name, id_, peer_, client_,
                     a.swapped ? "set" : "left unchanged (value differed)", a.action.key);
  }
}

void StoreSession::noteHello(const wire::Request& hello) {
  std::string fields;
  for (std::size_t i = 0; i + 1 < hello.keys.size(); i += 2) {
    const bool secret = hello.keys[i] == kTokenField;  // never logged
    fields += (fields.empty() ? "" : ", ") + printable(hello.keys[i]) + "=" +
              (secret ? std::string("(redacted)") : printable(hello.keys[i + 1]));
  }
  client_ = " (" + fields + ")";
  core_->log->debug("{}: connection {} from {} says HELLO{}", core_->options.name, id_, peer_,
                    client_);
}

bool StoreSession::admitRequest(const wire::Request& request) {
  const SessionAuth::Decision decision = auth_.check(request);
  if (decision.verdict == SessionAuth::Verdict::kServe) return true;
  core_->refusals.refused(*core_->log, core_->options.name, peer_, RefusalKind::kToken,
                          decision.reason);
  if (decision.verdict == SessionAuth::Verdict::kRefuse) {
    close("");
    return false;
  }
  const std::string_view fields[] = {"server", "ddprun store", "error", decision.reason};
  wire::encodeHelloReply(out_, wire::kHelloRefused, 0, fields);
  closeAfterWrite_ = true;
  flush();
  return false;
}

void StoreSession::onWaitComplete() {
  wire::encodeByteReply(out_, wire::kStopWaiting);
  if (!processing_) flush();
}

void StoreSession::readMore() {
  if (readActive_ || stopped() || closeAfterWrite_ || outputBacklogged()) return;
  const std::size_t pending = inEnd_ - inBegin_;
  if (pending == 0) {
    inBegin_ = inEnd_ = 0;
    if (in_.size() > kShrinkAbove) std::vector<char>().swap(in_);
  }
  // Room for the rest of a partly received request, but grown at most by doubling: a length
  // prefix alone must not make us allocate the full (up to --max-value-bytes) buffer.
  const std::size_t missing = inNeeded_ > pending ? inNeeded_ - pending : 0;
  const std::size_t want = std::max(kReadChunk, std::min(missing, std::max(pending, kReadChunk)));
  if (in_.size() - inEnd_ < want) {
    if (inBegin_ > 0) {
      std::memmove(in_.data(), in_.data() + inBegin_, pending);
      inBegin_ = 0;
      inEnd_ = pending;
    }
    if (in_.size() - inEnd_ < want) in_.resize(inEnd_ + want);
  }
  readActive_ = true;
  stream_.asyncReadSome(
      asio::buffer(in_.data() + inEnd_, in_.size() - inEnd_),
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
  inEnd_ += n;
  core_->stats.bytesReceived += n;
  readAt_ = std::chrono::steady_clock::now();
  if (ambiguous_) {
    ambiguous_ = false;
    graceTimer_.cancel();
  }
  if (processInput()) readMore();
}

bool StoreSession::processInput() {
  processing_ = true;
  std::string reason;
  bool open = true;
  uint64_t applied = 0;
  while (open) {
    const std::string_view bytes(in_.data() + inBegin_, inEnd_ - inBegin_);
    auto result = decoder_.decode(bytes);
    if (auto* request = std::get_if<wire::Request>(&result)) {
      if (decoder_.dialect() != loggedDialect_) {
        loggedDialect_ = decoder_.dialect();
        core_->log->debug("{}: connection {} from {} speaks {}", core_->options.name, id_, peer_,
                          wire::dialectName(loggedDialect_));
      }
      if (request->op == wire::Op::kHello) noteHello(*request);
      if (!admitRequest(*request)) {
        processing_ = false;
        return false;
      }
      open = core_->state.apply(*request, *this, out_, reason);
      core_->stats.countRequest(request->op);
      ++applied;
      inBegin_ += request->size;
      continue;
    }
    if (auto* need = std::get_if<wire::NeedMore>(&result)) {
      inNeeded_ = need->atLeast;
      if (need->ambiguous) armGraceTimer();
      break;
    }
    reason = "malformed input: " + std::get<wire::Malformed>(result).reason;
    open = false;
  }
  processing_ = false;
  if (applied > 0) {
    const std::chrono::duration<double> took = std::chrono::steady_clock::now() - readAt_;
    core_->stats.observeRequests(took.count(), applied);
  }
  if (!open) {
    close(reason);
    return false;
  }
  flush();
  return true;
}

void StoreSession::armGraceTimer() {
  if (ambiguous_) return;
  ambiguous_ = true;
  graceTimer_.expires_after(core_->options.v1AmbiguityGrace);
  graceTimer_.async_wait([self = shared_from_this()](const boost::system::error_code& ec) {
    if (self->stopped() || ec || !self->ambiguous_) return;
    self->ambiguous_ = false;
    self->decoder_.resolveAmbiguityAsV1a();
    if (self->processInput()) self->readMore();
  });
}

void StoreSession::flush() {
  if (writeActive_ || out_.empty() || closed_) return;
  writing_.swap(out_);
  writeActive_ = true;
  core_->stats.bytesSent += writing_.size();
  stream_.asyncWrite(asio::buffer(writing_),
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
  if (writing_.capacity() > kShrinkAbove) std::string().swap(writing_);
  if (closeAfterWrite_ && out_.empty()) return close("");
  flush();
  readMore();
}

bool StoreSession::outputBacklogged() const {
  return out_.size() + writing_.size() > kMaxOutputBacklog;
}

}  // namespace ddp::detail
