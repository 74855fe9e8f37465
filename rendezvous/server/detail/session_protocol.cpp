#include "rendezvous/server/detail/session_protocol.hpp"

#include <utility>
#include <variant>

namespace ddp::detail {

namespace {

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

// Decoder memory below this is not worth a budget check.
constexpr std::size_t kDecoderSlack = 64 * 1024;

}  // namespace

SessionProtocol::SessionProtocol(std::shared_ptr<ServerCore> core, std::string peer,
                                 PeerIdentity identity)
    : core_(std::move(core)),
      decoder_(core_->options.limits, core_->options.legacyDialect),
      input_(core_->budget, core_->options.limits.maxRequestBytes),
      out_(core_->budget),
      peer_(std::move(peer)),
      peerKey_(std::move(identity.key)),
      id_(core_->nextSessionId++),
      auth_(core_->options.token, identity.tokenExempt) {}

SessionProtocol::~SessionProtocol() { disconnect(!core_->stopped); }

void SessionProtocol::disconnect(bool applyOnClose) {
  if (disconnected_) return;
  disconnected_ = true;
  for (const auto& a : core_->state.disconnect(*this, applyOnClose)) {
    core_->log->info("{}: connection {} from {}{} closed; its ON_CLOSE {} '{}'",
                     core_->options.name, id_, peer_, client_,
                     a.refused  ? "was refused (memory budget)"
                     : a.swapped ? "set"
                                 : "left unchanged (value differed)",
                     a.action.key);
  }
  core_->commitChanges();
}

std::optional<std::span<char>> SessionProtocol::readBuffer() {
  auto room = input_.room(need_);
  if (!room) {
    fail("a request of " + std::to_string(need_) + " bytes does not fit in the memory budget (" +
             std::to_string(core_->budget.used() >> 20) + " of " +
             std::to_string(core_->budget.limit() >> 20) + " MiB in use; --max-memory)",
         true);
  }
  return room;
}

SessionProtocol::Outcome SessionProtocol::received(std::size_t n) {
  input_.commit(n);
  core_->storeStats.bytesReceived += n;
  readAt_ = std::chrono::steady_clock::now();
  return process();
}

SessionProtocol::Outcome SessionProtocol::resolveAmbiguity() {
  decoder_.resolveAmbiguityAsV1a();
  need_ = 0;
  return process();
}

void SessionProtocol::onWaitComplete() {
  out_.putU8(wire::kStopWaiting);
  if (!processing_) repliesReady();
}

SessionProtocol::Outcome SessionProtocol::fail(std::string reason, bool memory) {
  reason_ = std::move(reason);
  bump(memory ? core_->counters.closedMemory : core_->counters.closedBadInput);
  return Outcome::kClose;
}

SessionProtocol::Outcome SessionProtocol::process() {
  processing_ = true;
  Outcome outcome = Outcome::kContinue;
  uint64_t applied = 0;
  for (;;) {
    const std::string_view bytes = input_.pending();
    if (bytes.empty() || bytes.size() < need_) break;  // nothing new to decode
    auto result = decoder_.decode(bytes);
    if (auto* request = std::get_if<wire::Request>(&result)) {
      need_ = 0;
      if (auto refused = admit(*request)) {
        outcome = *refused;
        break;
      }
      const bool ok = handle(*request);
      core_->storeStats.countRequest(request->op);
      ++applied;
      if (!ok) {
        outcome = Outcome::kClose;
        break;
      }
      input_.consume(request->size);
      continue;
    }
    if (auto* more = std::get_if<wire::NeedMore>(&result)) {
      need_ = more->atLeast;
      if (more->ambiguous) outcome = Outcome::kAmbiguous;
      break;
    }
    outcome = fail("malformed input: " + std::get<wire::Malformed>(result).reason, false);
    break;
  }
  processing_ = false;
  core_->commitChanges();  // the changes of this batch of requests: one journal record
  if (applied > 0) {
    const std::chrono::duration<double> took = std::chrono::steady_clock::now() - readAt_;
    core_->storeStats.observeRequests(took.count(), applied);
  }
  core_->counters.keys.store(core_->state.numKeys(), std::memory_order_relaxed);
  if (outcome == Outcome::kClose || outcome == Outcome::kCloseWhenWritten) return outcome;
  // The decoder's views of a long key list are charged too; past the budget, this connection
  // (the one growing) goes.
  decoderCharge_.set(core_->budget, decoder_.memoryBytes());
  if (decoder_.memoryBytes() > kDecoderSlack && core_->budget.used() > core_->budget.limit()) {
    return fail("a request's key list does not fit in the memory budget (--max-memory)", true);
  }
  if (input_.pending().empty() && decoder_.memoryBytes() > 4096) {
    decoder_.trim();
    decoderCharge_.set(core_->budget, decoder_.memoryBytes());
  }
  return outcome;
}

bool SessionProtocol::handle(const wire::Request& request) {
  bump(core_->counters.requests);
  if (decoder_.dialect() != loggedDialect_) {
    loggedDialect_ = decoder_.dialect();
    core_->log->debug("{}: connection {} from {} speaks {}", core_->options.name, id_, peer_,
                      wire::dialectName(loggedDialect_));
  }
  if (request.op == wire::Op::kRequestId) {
    tag_.emplace(request.client, request.sequence);
    return true;
  }
  const auto tag = std::exchange(tag_, std::nullopt);
  const bool applied =
      tag ? core_->state.applyTagged(request, tag->first, tag->second, *this, out_, reason_,
                                     &input_.blob())
          : core_->state.apply(request, *this, out_, reason_, &input_.blob());
  if (applied) return true;
  bump(core_->state.refusedForMemory() ? core_->counters.closedMemory
                                       : core_->counters.closedBadInput);
  return false;
}

std::optional<SessionProtocol::Outcome> SessionProtocol::admit(const wire::Request& request) {
  if (request.op == wire::Op::kHello) noteHello(request);
  const bool before = auth_.authenticated();
  const SessionAuth::Decision decision = auth_.check(request);
  if (!before && auth_.authenticated() && core_->unauthenticated) {
    core_->unauthenticated->remove(id_);  // it holds the token: no longer bounded as a stranger
    core_->countUnauthenticated();
  }
  if (decision.verdict == SessionAuth::Verdict::kServe) return std::nullopt;
  core_->refusals.refused(*core_->log, core_->options.name, peer_, RefusalKind::kToken,
                          decision.reason);
  reason_.clear();  // an orderly close: the refusal is logged above
  if (decision.verdict == SessionAuth::Verdict::kRefuse) return Outcome::kClose;
  const std::string_view fields[] = {"server", "ddprun store", "error", decision.reason};
  out_.encode([&](std::string& bytes) {
    wire::encodeHelloReply(bytes, wire::kHelloRefused, 0, fields);
  });
  return Outcome::kCloseWhenWritten;
}

void SessionProtocol::noteHello(const wire::Request& hello) {
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

}  // namespace ddp::detail
