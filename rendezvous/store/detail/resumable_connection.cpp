#include "rendezvous/store/detail/resumable_connection.hpp"

#include <algorithm>
#include <random>

#include "rendezvous/base/duration_text.hpp"
#include "rendezvous/base/endpoint.hpp"
#include "rendezvous/base/error.hpp"
#include "rendezvous/base/logging.hpp"

namespace ddp::detail {

namespace {

using wire::Op;

bool hasReply(Op op) {
  return op != Op::kSet && op != Op::kAppend && op != Op::kMultiSet && op != Op::kQueuePush;
}

// How long a store that keeps no data is waited for: a dropped connection to a live server is
// regained at once, and a server that is gone took its keys with it (nothing to resume).
constexpr std::chrono::milliseconds kVolatileReconnect{2000};

std::string fieldValue(const std::vector<std::string_view>& values, std::string_view name) {
  for (std::size_t i = 0; i + 1 < values.size(); i += 2) {
    if (values[i] == name) return std::string(values[i + 1]);
  }
  return {};
}

uint64_t randomClientId() {
  std::random_device device;
  uint64_t id = 0;
  while (id == 0) id = (uint64_t{device()} << 32) ^ device();
  return id;
}

}  // namespace

ResumableConnection::ResumableConnection(const TcpStoreClientOptions& options)
    : options_(options),
      conn_(std::make_unique<StoreConnection>(options)),
      clientId_(randomClientId()) {}

void ResumableConnection::send(const wire::Request& request, Clock::time_point deadline,
                               const std::string& what) {
  if (!resumable_ || !changesStore(request.op)) return conn_->send(request, deadline, what);
  if (opSequence_ != 0) return;  // sent before the connection was lost, and again since
  opSequence_ = nextSequence_++;
  std::string bytes;
  wire::Request tag;
  tag.op = Op::kRequestId;
  tag.client = clientId_;
  tag.sequence = opSequence_;
  wire::encodeRequest(bytes, conn_->dialect(), tag);
  wire::encodeRequest(bytes, conn_->dialect(), request);
  unacked_.push_back(std::move(bytes));
  conn_->sendRaw(unacked_.back(), deadline, what);
  if (unacked_.size() >= kMaxUnacked && !hasReply(request.op)) {
    wire::Request ping;
    ping.op = Op::kPing;
    ping.nonce = static_cast<uint32_t>(opSequence_);
    conn_->send(ping, deadline, "PING");
    expect(Op::kPing, 0, deadline, options_.timeout, "PING");
  }
}

std::optional<wire::OwnedReply> ResumableConnection::receive(Op op, std::size_t keyCount,
                                                             Clock::time_point deadline,
                                                             const std::string& what,
                                                             int interruptFd) {
  auto reply = conn_->receive(op, keyCount, deadline, what, interruptFd);
  if (reply) acknowledged();
  return reply;
}

wire::OwnedReply ResumableConnection::expect(Op op, std::size_t keyCount,
                                             Clock::time_point deadline,
                                             std::chrono::milliseconds budget,
                                             const std::string& what) {
  auto reply = conn_->expect(op, keyCount, deadline, budget, what);
  acknowledged();
  return reply;
}

void ResumableConnection::setFarewell(std::string bytes) {
  farewell_ = bytes;
  conn_->setFarewell(std::move(bytes));
}

void ResumableConnection::helloDone(uint64_t capabilities,
                                    const std::vector<std::string_view>& fields) {
  capabilities_ = capabilities;
  helloFields_.assign(fields.begin(), fields.end());
  resumable_ = (capabilities & wire::kCapRequestId) != 0 &&
               options_.reconnectBudget > std::chrono::milliseconds::zero();
}

void ResumableConnection::serverIdentity(bool durable, std::string instance) {
  serverDurable_ = durable;
  serverInstance_ = std::move(instance);
}

void ResumableConnection::noteOnClose(const std::string& key, const std::string& expected,
                                      const std::string& desired) {
  for (auto& held : onClose_) {
    if (held.key == key) {
      held = OnClose{key, expected, desired};
      return;
    }
  }
  onClose_.push_back(OnClose{key, expected, desired});
}

void ResumableConnection::noteOnCloseClear(const std::vector<std::string>& keys) {
  if (keys.empty()) return onClose_.clear();
  std::erase_if(onClose_, [&](const OnClose& held) {
    return std::find(keys.begin(), keys.end(), held.key) != keys.end();
  });
}

void ResumableConnection::reconnect(Clock::time_point until, std::exception_ptr loss) {
  auto log = logger("store");
  if (!serverDurable_) until = std::min(until, Clock::now() + kVolatileReconnect);
  for (int round = 0;; ++round) {
    const auto left = std::chrono::ceil<std::chrono::milliseconds>(until - Clock::now());
    if (left <= std::chrono::milliseconds::zero()) std::rethrow_exception(loss);
    if (round == 0) {
      log->warn("connection to the store at {} lost; reconnecting (for up to {})",
                conn_->endpoint(), durationText(left));
    }
    TcpStoreClientOptions options = options_;
    options.connectTimeout = left;
    try {
      conn_ = std::make_unique<StoreConnection>(options);
      restore(until);
      ++reconnects_;
      log->info("reconnected to the store at {}; {} unacknowledged change{} sent again",
                conn_->endpoint(), unacked_.size(), unacked_.size() == 1 ? "" : "s");
      return;
    } catch (const OverloadedError& e) {  // the server is up but out of descriptors
      throw OverloadedError(notRegained() + e.what());
    } catch (const TimeoutError& e) {
      throw NetworkError(notRegained() + e.what());
    } catch (const NetworkError&) {
      if (!conn_ || !conn_->lost()) throw;  // lost again while restoring: try again
    }
  }
}

std::string ResumableConnection::notRegained() const {
  return "connection to the store at " + formatEndpoint(options_.endpoint) +
         " lost and not regained within " +
         durationText(serverDurable_ ? options_.reconnectBudget : kVolatileReconnect) +
         (serverDurable_ ? "" : " (a store that keeps no data)") + ": ";
}

// Says HELLO, registers the ON_CLOSE actions and sends the unacknowledged changes again.
void ResumableConnection::restore(Clock::time_point until) {
  const std::vector<std::string_view> views(helloFields_.begin(), helloFields_.end());
  wire::Request hello;
  hello.op = Op::kHello;
  hello.version = wire::kExtensionVersion;
  hello.capabilities = capabilities_;
  hello.keys = views;
  conn_->send(hello, until, "HELLO");
  const auto answer = conn_->expect(Op::kHello, 0, until, options_.reconnectBudget, "HELLO");
  if (answer.status != wire::kHelloAccepted || (answer.capabilities & wire::kCapRequestId) == 0) {
    const ProtocolError error("the store at " + conn_->endpoint() +
                              " no longer grants REQUEST_ID after a restart; cannot resume");
    conn_->markFailed(std::make_exception_ptr(error));
    throw error;
  }
  if (!serverDurable_) {
    const std::vector<std::string_view> values(answer.values.begin(), answer.values.end());
    if (fieldValue(values, "instance") != serverInstance_) {
      // A new server without the old one's keys: resuming would run the job on an empty store.
      const NetworkError error("the store at " + conn_->endpoint() +
                               " restarted without its data (it keeps none: no --data-dir); "
                               "cannot resume");
      conn_->markFailed(std::make_exception_ptr(error));
      throw error;  // not lost(): reconnect() gives up
    }
  }
  conn_->setFarewell(farewell_);
  for (const auto& held : onClose_) {
    wire::Request arm;
    arm.op = Op::kOnClose;
    arm.key = held.key;
    arm.value = held.expected;
    arm.desired = held.desired;
    conn_->send(arm, until, "ON_CLOSE");
    conn_->expect(Op::kOnClose, 0, until, options_.reconnectBudget, "ON_CLOSE");
  }
  for (const auto& bytes : unacked_) conn_->sendRaw(bytes, until, "a change sent again");
}

}  // namespace ddp::detail
