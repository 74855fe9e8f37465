#include "rendezvous/store/tcp_store_client.hpp"

#include <sys/eventfd.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <cstring>
#include <mutex>
#include <stdexcept>
#include <string_view>

#include "rendezvous/store/detail/resumable_connection.hpp"
#include "rendezvous/base/duration_text.hpp"
#include "rendezvous/base/error.hpp"
#include "rendezvous/wire/wire_codec.hpp"

namespace ddp {

namespace {

using Clock = std::chrono::steady_clock;
using wire::Op;

// How long the server gets to answer CANCEL_WAIT before the connection is given up.
constexpr std::chrono::milliseconds kCancelBudget{std::chrono::seconds(30)};

std::string describeOp(Op op, const std::vector<std::string>& keys) {
  if (keys.empty()) return std::string(wire::opName(op));
  return std::string(wire::opName(op)) + " of " + detail::formatKeys(keys);
}

}  // namespace

class TcpStoreClient::Impl {
 public:
  explicit Impl(const TcpStoreClientOptions& options)
      : token_(options.token),
        timeoutMs_(options.timeout.count()),
        wakeFd_(::eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC)),
        conn_(options) {
    if (wakeFd_ < 0) throw NetworkError(std::string("eventfd: ") + std::strerror(errno));
  }
  ~Impl() { ::close(wakeFd_); }
  Impl(const Impl&) = delete;
  Impl& operator=(const Impl&) = delete;

  std::chrono::milliseconds timeout() const { return std::chrono::milliseconds(timeoutMs_.load()); }
  Clock::time_point deadline() const { return detail::deadlineAfter(timeout()); }

  // Sends `op` on `keys` (values: SET/APPEND value, COMPARE_SET expected/desired).
  void send(Op op, const std::vector<std::string>& keys, const std::string& value = {},
            const std::string& desired = {}, int64_t number = 0) {
    std::vector<std::string_view> views(keys.begin(), keys.end());
    wire::Request request;
    request.op = op;
    if (op == Op::kCheck || op == Op::kWait || op == Op::kMultiGet) {
      request.keys = views;
    } else if (!keys.empty()) {
      request.key = keys.front();
    }
    request.value = value;
    request.desired = desired;
    request.number = number;
    conn_.send(request, deadline(), describeOp(op, keys));
  }

  // Sends `op` and reads its reply within timeout().
  wire::OwnedReply call(Op op, const std::vector<std::string>& keys, const std::string& value = {},
                        const std::string& desired = {}, int64_t number = 0) {
    send(op, keys, value, desired, number);
    const std::size_t keyCount = op == Op::kMultiGet ? keys.size() : 0;
    return conn_.expect(op, keyCount, deadline(), timeout(), describeOp(op, keys));
  }

  [[noreturn]] void protocolError(const std::string& what, int status) {
    const ProtocolError error("bad reply from the store at " + conn_.endpoint() + " to " + what +
                              ": unexpected status byte " + std::to_string(status));
    conn_.markFailed(std::make_exception_ptr(error));
    throw error;
  }

  // Waits for `keys` until `until` (`budget` from the caller's start, for messages); a lost
  // connection is resumed and the WAIT sent again with what is left.
  void waitKeys(const std::vector<std::string>& keys, std::chrono::milliseconds budget) {
    const auto until = detail::deadlineAfter(budget);
    conn_.retry([&] { waitKeysUntil(keys, budget, until); });
  }
  void waitKeysUntil(const std::vector<std::string>& keys, std::chrono::milliseconds budget,
                     Clock::time_point until);
  void cancelWait(const std::string& timeoutMessage);
  std::string getExisting(const std::string& key) {
    return std::move(call(Op::kGet, {key}).values.at(0));
  }
  bool check(const std::vector<std::string>& keys);
  void appendV1a(const std::string& key, const std::string& value);
  bool isV1a() const { return conn_.dialect() == wire::Dialect::kV1a; }

  // Consumes a latched interruptWait(); true when there was one.
  bool takeInterrupt() {
    uint64_t count = 0;
    return ::read(wakeFd_, &count, sizeof(count)) == static_cast<ssize_t>(sizeof(count));
  }
  std::optional<ServerHello> hello(uint64_t capabilities, const std::vector<HelloField>& fields);
  int64_t onCloseCall(Op op, const std::vector<std::string>& keys, const std::string& expected,
                      const std::string& desired);

  const std::string token_;  // HELLO's "token" field; "" = none
  std::mutex mutex_;  // serialises requests on the connection
  std::atomic<int64_t> timeoutMs_;
  const int wakeFd_;  // eventfd: interruptWait() makes it readable
  std::atomic<bool> onClose_{false};
  // Guarded by mutex_
  detail::ResumableConnection conn_;
};

void TcpStoreClient::Impl::waitKeysUntil(const std::vector<std::string>& keys,
                                         std::chrono::milliseconds budget,
                                         Clock::time_point until) {
  conn_.throwIfFailed();
  if (keys.empty()) return;  // a zero-key WAIT is answered at once: skip the round trip
  const std::string what = describeOp(Op::kWait, keys);
  std::vector<std::string_view> views(keys.begin(), keys.end());
  wire::Request request;
  request.op = Op::kWait;
  request.keys = views;
  conn_.send(request, until, what);
  if (const auto reply = conn_.receive(Op::kWait, 0, until, what, wakeFd_)) {
    if (reply->status != wire::kStopWaiting) protocolError(what, reply->status);
    return;
  }
  const std::string message =
      (takeInterrupt() ? "interrupted (before its " + durationText(budget) + " budget) "
                       : "timed out after " + durationText(budget) + " ") +
      "waiting for keys " + detail::formatKeys(keys) + " on " + conn_.endpoint();
  if (isV1a()) {
    conn_.markFailed(std::make_exception_ptr(NetworkError(
        "connection to the store at " + conn_.endpoint() + " is unusable: earlier, " + message +
        ", and the v1a (torch 1.13) protocol cannot cancel a wait, so its late reply would be "
        "taken for the next one; create a new client")));
    throw TimeoutError(message);
  }
  cancelWait(message);
}

// v2: tells the server to drop the wait and reads its answer, so the stream stays in step.
void TcpStoreClient::Impl::cancelWait(const std::string& timeoutMessage) {
  const auto budget = std::min(kCancelBudget, timeout());
  const auto until = detail::deadlineAfter(budget);
  const std::string what = "CANCEL_WAIT";
  wire::Request request;
  request.op = Op::kCancelWait;
  conn_.send(request, until, what);
  auto reply = conn_.expect(Op::kCancelWait, 0, until, budget, what);
  if (reply.status == wire::kStopWaiting) {
    // The keys arrived while we gave up: the wait succeeded; the cancel answer follows.
    reply = conn_.expect(Op::kCancelWait, 0, until, budget, what);
    if (reply.status != wire::kWaitCanceled) protocolError(what, reply.status);
    return;
  }
  if (reply.status != wire::kWaitCanceled) protocolError(what, reply.status);
  throw TimeoutError(timeoutMessage);
}

bool TcpStoreClient::Impl::check(const std::vector<std::string>& keys) {
  const auto reply = call(Op::kCheck, keys);
  if (reply.status == wire::kReady) return true;
  if (reply.status == wire::kNotReady) return false;
  protocolError(describeOp(Op::kCheck, keys), reply.status);
}

// v1a has no APPEND: read-modify-write with COMPARE_SET until no other client interfered.
void TcpStoreClient::Impl::appendV1a(const std::string& key, const std::string& value) {
  for (;;) {
    if (!check({key})) {
      if (call(Op::kCompareSet, {key}, "", value).values.at(0) == value) return;
      continue;
    }
    const std::string current = getExisting(key);
    const std::string desired = current + value;
    if (call(Op::kCompareSet, {key}, current, desired).values.at(0) == desired) return;
  }
}

TcpStoreClient::TcpStoreClient(TcpStoreClientOptions options)
    : impl_(std::make_unique<Impl>(options)) {}

TcpStoreClient::~TcpStoreClient() = default;

std::string TcpStoreClient::endpoint() const { return impl_->conn_.endpoint(); }

void TcpStoreClient::set(const std::string& key, const std::string& value) {
  std::lock_guard<std::mutex> lock(impl_->mutex_);
  impl_->conn_.retry([&] { impl_->send(Op::kSet, {key}, value); });
}

std::string TcpStoreClient::get(const std::string& key) {
  std::lock_guard<std::mutex> lock(impl_->mutex_);
  impl_->waitKeys({key}, impl_->timeout());
  return impl_->conn_.retry([&] { return impl_->getExisting(key); });
}

int64_t TcpStoreClient::add(const std::string& key, int64_t delta) {
  std::lock_guard<std::mutex> lock(impl_->mutex_);
  return impl_->conn_.retry([&] { return impl_->call(Op::kAdd, {key}, {}, {}, delta).integer; });
}

std::string TcpStoreClient::compareSet(const std::string& key, const std::string& expected,
                                       const std::string& desired) {
  std::lock_guard<std::mutex> lock(impl_->mutex_);
  return impl_->conn_.retry(
      [&] { return std::move(impl_->call(Op::kCompareSet, {key}, expected, desired).values.at(0)); });
}

void TcpStoreClient::wait(const std::vector<std::string>& keys, std::chrono::milliseconds timeout) {
  std::lock_guard<std::mutex> lock(impl_->mutex_);
  impl_->waitKeys(keys, timeout);
}

bool TcpStoreClient::check(const std::vector<std::string>& keys) {
  std::lock_guard<std::mutex> lock(impl_->mutex_);
  return impl_->conn_.retry([&] { return impl_->check(keys); });
}

bool TcpStoreClient::deleteKey(const std::string& key) {
  std::lock_guard<std::mutex> lock(impl_->mutex_);
  return impl_->conn_.retry([&] { return impl_->call(Op::kDeleteKey, {key}).integer == 1; });
}

int64_t TcpStoreClient::numKeys() {
  std::lock_guard<std::mutex> lock(impl_->mutex_);
  return impl_->conn_.retry([&] { return impl_->call(Op::kGetNumKeys, {}).integer; });
}

std::vector<std::string> TcpStoreClient::multiGet(const std::vector<std::string>& keys) {
  std::lock_guard<std::mutex> lock(impl_->mutex_);
  impl_->waitKeys(keys, impl_->timeout());
  if (keys.empty()) return {};
  if (!impl_->isV1a()) {
    return impl_->conn_.retry([&] { return std::move(impl_->call(Op::kMultiGet, keys).values); });
  }
  std::vector<std::string> values;
  values.reserve(keys.size());
  for (const auto& key : keys) values.push_back(impl_->getExisting(key));
  return values;
}

void TcpStoreClient::multiSet(const std::vector<std::string>& keys,
                              const std::vector<std::string>& values) {
  if (keys.size() != values.size()) {
    throw std::invalid_argument("multiSet: " + std::to_string(keys.size()) + " keys but " +
                                std::to_string(values.size()) + " values");
  }
  std::lock_guard<std::mutex> lock(impl_->mutex_);
  if (keys.empty()) return impl_->conn_.throwIfFailed();
  if (impl_->isV1a()) {
    for (std::size_t i = 0; i < keys.size(); ++i) impl_->send(Op::kSet, {keys[i]}, values[i]);
    return;
  }
  // MULTI_SET alternates key, value in Request::keys.
  std::vector<std::string_view> pairs;
  pairs.reserve(keys.size() * 2);
  for (std::size_t i = 0; i < keys.size(); ++i) {
    pairs.emplace_back(keys[i]);
    pairs.emplace_back(values[i]);
  }
  wire::Request request;
  request.op = Op::kMultiSet;
  request.keys = pairs;
  impl_->conn_.retry(
      [&] { impl_->conn_.send(request, impl_->deadline(), describeOp(Op::kMultiSet, keys)); });
}

void TcpStoreClient::append(const std::string& key, const std::string& value) {
  std::lock_guard<std::mutex> lock(impl_->mutex_);
  if (impl_->isV1a()) return impl_->appendV1a(key, value);
  impl_->conn_.retry([&] { impl_->send(Op::kAppend, {key}, value); });
}

std::optional<ServerHello> TcpStoreClient::Impl::hello(uint64_t capabilities,
                                                       const std::vector<HelloField>& fields) {
  if (isV1a()) throw ProtocolError("ddprun's HELLO needs the v2 dialect");
  std::vector<std::string_view> views;
  for (const auto& [name, value] : fields) {
    views.emplace_back(name);
    views.emplace_back(value);
  }
  if (!token_.empty()) {
    views.emplace_back("token");
    views.emplace_back(token_);
  }
  wire::Request request;
  request.op = Op::kHello;
  request.version = wire::kExtensionVersion;
  request.capabilities = capabilities;
  request.keys = views;
  conn_.send(request, deadline(), "HELLO");
  std::optional<wire::OwnedReply> reply;
  try {
    reply = conn_.expect(Op::kHello, 0, deadline(), timeout(), "HELLO");
  } catch (const NetworkError&) {
    if (conn_.closedByServer()) return std::nullopt;  // a server without the extension
    throw;
  }
  ServerHello answer{reply->status == wire::kHelloAccepted, reply->version, reply->capabilities,
                     {}};
  for (std::size_t i = 0; i + 1 < reply->values.size(); i += 2) {
    answer.fields.emplace_back(reply->values[i], reply->values[i + 1]);
  }
  if (answer.accepted) {
    conn_.helloDone(capabilities & answer.capabilities, views);
    std::string instance;
    for (const auto& [name, value] : answer.fields) {
      if (name == "instance") instance = value;
    }
    conn_.serverIdentity((answer.capabilities & wire::kCapDurable) != 0, std::move(instance));
  }
  if (answer.accepted && (answer.capabilities & wire::kCapOnClose) != 0) {
    // From now on a connection this client gives up on clears its registrations first.
    std::string farewell;
    wire::Request clearAll;
    clearAll.op = Op::kOnCloseClear;
    wire::encodeRequest(farewell, conn_.dialect(), clearAll);
    conn_.setFarewell(std::move(farewell));
    onClose_ = true;
  }
  return answer;
}

int64_t TcpStoreClient::Impl::onCloseCall(Op op, const std::vector<std::string>& keys,
                                          const std::string& expected,
                                          const std::string& desired) {
  const std::string what = describeOp(op, keys);
  if (!onClose_) {
    throw ProtocolError("the store at " + conn_.endpoint() + " did not grant ON_CLOSE (" + what +
                        ")");
  }
  std::vector<std::string_view> views(keys.begin(), keys.end());
  wire::Request request;
  request.op = op;
  if (op == Op::kOnClose) {
    request.key = keys.at(0);
  } else {
    request.keys = views;
  }
  request.value = expected;
  request.desired = desired;
  conn_.send(request, deadline(), what);
  return conn_.expect(op, 0, deadline(), timeout(), what).integer;
}

std::optional<ServerHello> TcpStoreClient::hello(uint64_t capabilities,
                                                 const std::vector<HelloField>& fields) {
  std::lock_guard<std::mutex> lock(impl_->mutex_);
  return impl_->hello(capabilities, fields);
}

void TcpStoreClient::interruptWait() {
  const uint64_t one = 1;
  (void)!::write(impl_->wakeFd_, &one, sizeof(one));  // cannot block: the counter saturates late
}

bool TcpStoreClient::onCloseSupported() const { return impl_->onClose_.load(); }

bool TcpStoreClient::usable() const {
  std::lock_guard<std::mutex> lock(impl_->mutex_);
  return !impl_->conn_.failed();
}

uint64_t TcpStoreClient::reconnects() const {
  std::lock_guard<std::mutex> lock(impl_->mutex_);
  return impl_->conn_.reconnects();
}

void TcpStoreClient::armOnClose(const std::string& key, const std::string& expected,
                                const std::string& desired) {
  std::lock_guard<std::mutex> lock(impl_->mutex_);
  const int64_t held = impl_->conn_.retry(
      [&] { return impl_->onCloseCall(Op::kOnClose, {key}, expected, desired); });
  if (held != wire::kOnCloseRefused) impl_->conn_.noteOnClose(key, expected, desired);
  if (held == wire::kOnCloseRefused) {
    throw ProtocolError("the store at " + impl_->conn_.endpoint() +
                        " refused an ON_CLOSE registration for '" + key +
                        "' (too many on this connection)");
  }
}

void TcpStoreClient::clearOnClose(const std::vector<std::string>& keys) {
  std::lock_guard<std::mutex> lock(impl_->mutex_);
  impl_->conn_.noteOnCloseClear(keys);  // a reconnect registers only what is left
  impl_->conn_.retry([&] { impl_->onCloseCall(Op::kOnCloseClear, keys, {}, {}); });
}

std::unique_ptr<TcpStoreClient> connectTcpStore(const TcpStoreClientOptions& options,
                                                uint64_t capabilities,
                                                const std::vector<HelloField>& fields) {
  const auto deadline = detail::deadlineAfter(options.connectTimeout);
  auto client = std::make_unique<TcpStoreClient>(options);
  if (const auto answer = client->hello(capabilities, fields)) {
    if (answer->accepted) return client;
    std::string reason = "no reason given";
    for (const auto& [name, value] : answer->fields) {
      if (name == "error") reason = value;
    }
    throw ConfigError("the store at " + client->endpoint() + " refused this client: " + reason +
                      (options.token.empty() ? " (set --rdzv-conf token_file=)" : ""));
  }
  TcpStoreClientOptions plain = options;
  const auto left = std::chrono::ceil<std::chrono::milliseconds>(deadline - Clock::now());
  plain.connectTimeout = std::max(std::chrono::milliseconds(1), left);
  return std::make_unique<TcpStoreClient>(plain);
}

std::chrono::milliseconds TcpStoreClient::timeout() const { return impl_->timeout(); }

void TcpStoreClient::setTimeout(std::chrono::milliseconds timeout) {
  impl_->timeoutMs_.store(timeout.count());
}

}  // namespace ddp
