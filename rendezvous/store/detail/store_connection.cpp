#include "rendezvous/store/detail/store_connection.hpp"

#include <unistd.h>

#include <algorithm>
#include <cstdio>

#include <boost/asio/error.hpp>
#include <boost/asio/ip/tcp.hpp>

#include "rendezvous/base/backoff.hpp"
#include "rendezvous/store/detail/connect_attempts.hpp"
#include "rendezvous/base/endpoint.hpp"
#include "rendezvous/base/error.hpp"
#include "rendezvous/security/tls_context.hpp"

namespace ddp::detail {

namespace asio = boost::asio;
using asio::ip::tcp;
using boost::system::error_code;

std::chrono::steady_clock::time_point deadlineAfter(std::chrono::milliseconds budget) {
  using Clock = std::chrono::steady_clock;
  const auto now = Clock::now();
  if (budget.count() <= 0) return now;
  const auto room =
      std::chrono::duration_cast<std::chrono::milliseconds>(Clock::time_point::max() - now);
  if (budget >= room) return Clock::time_point::max();
  return now + budget;
}

std::string formatKeys(const std::vector<std::string>& keys) {
  constexpr std::size_t kMaxKeyChars = 120;
  std::string out = "[";
  for (std::size_t i = 0; i < keys.size(); ++i) {
    if (i > 0) out += ", ";
    if (i == 16) {
      out += "... " + std::to_string(keys.size() - 16) + " more";
      break;
    }
    const std::string& key = keys[i];
    for (std::size_t c = 0; c < key.size() && c < kMaxKeyChars; ++c) {
      const auto byte = static_cast<unsigned char>(key[c]);
      if (byte >= 0x20 && byte < 0x7f) {
        out += static_cast<char>(byte);
      } else {
        char hex[8];
        std::snprintf(hex, sizeof(hex), "\\x%02x", byte);
        out += hex;
      }
    }
    if (key.size() > kMaxKeyChars) out += "...";
  }
  return out + "]";
}

namespace {

wire::Dialect toWire(WireDialect dialect) {
  switch (dialect) {
    case WireDialect::kV1a: return wire::Dialect::kV1a;
    case WireDialect::kV2: return wire::Dialect::kV2;
  }
  return wire::Dialect::kV2;
}

std::string describe(const error_code& ec) {
  if (ec == asio::error::eof) return "the server closed the connection";
  if (ec == asio::error::timed_out) return "no answer in time";
  return ec.message();
}

}  // namespace

StoreConnection::StoreConnection(const TcpStoreClientOptions& options)
    : options_(options),
      tls_(options.tls.enabled() ? makeClientTlsContext(options.tls) : nullptr),
      endpoint_(formatEndpoint(options.endpoint)),
      dialect_(toWire(options.dialect)),
      socket_(io_) {
  const auto deadline = deadlineAfter(options_.connectTimeout);
  Backoff backoff(options_.connectBackoff);
  ConnectAttempts attempts(options_, endpoint_);
  bool resolved = false;
  tcp::resolver resolver(io_);
  do {
    error_code ec;
    const auto results =
        resolver.resolve(options_.endpoint.host, std::to_string(options_.endpoint.port),
                         tcp::resolver::numeric_service, ec);
    if (ec) {
      attempts.failed("resolving '" + options_.endpoint.host + "'", ec.message());
      continue;
    }
    resolved = true;
    const std::size_t addresses = std::max<std::size_t>(1, results.size());
    for (const auto& entry : results) {
      // Give every address a share of what is left so one black hole cannot eat the budget.
      const auto share =
          std::max<Clock::duration>(std::chrono::seconds(1), (deadline - Clock::now()) / addresses);
      const tcp::endpoint address = entry.endpoint();
      const std::string failure = attempt(address, std::min(deadline, Clock::now() + share));
      if (failure.empty()) return;
      attempts.failed(formatSocketEndpoint(address), failure,
                      overloaded_);
    }
  } while (backoff.sleepBefore(deadline));
  attempts.giveUp(resolved);
}

std::string StoreConnection::attempt(const tcp::endpoint& address, Clock::time_point deadline) {
  in_.clear();
  firstReply_ = true;
  overloaded_ = false;
  if (const error_code ec = socket_.connect(address, deadline)) return describe(ec);
  if (tls_) {
    std::string failure = socket_.startTls(tls_->native_handle(), options_.endpoint.host, deadline);
    if (!failure.empty()) return failure;
  }
  if (dialect_ != wire::Dialect::kV2) return {};
  std::string failure = handshake(deadline);
  if (!failure.empty()) socket_.close();
  return failure;
}

std::string StoreConnection::handshake(Clock::time_point deadline) {
  const auto nonce = static_cast<uint32_t>(::getpid());
  out_.clear();
  wire::Request validate;
  validate.op = wire::Op::kValidate;
  wire::encodeRequest(out_, dialect_, validate);
  wire::Request ping;
  ping.op = wire::Op::kPing;
  ping.nonce = nonce;
  wire::encodeRequest(out_, dialect_, ping);
  if (const error_code ec = socket_.writeAll(out_, deadline)) return "handshake: " + describe(ec);
  for (;;) {
    if (std::string busy = busyNotice(); !busy.empty()) return busy;
    const auto result = wire::decodeReply(in_, wire::Op::kPing);
    if (const auto* reply = std::get_if<wire::Reply>(&result)) {
      in_.erase(0, reply->size);
      if (reply->nonce == nonce) return {};
      return "PING echoed " + std::to_string(reply->nonce) + " instead of " + std::to_string(nonce);
    }
    if (const error_code ec = socket_.readSome(in_, deadline)) {
      if (!in_.empty() && wire::decodeBusyNotice(in_).kind != wire::BusyNotice::Kind::kNone) {
        return "the store closed the connection in the middle of a busy notice";
      }
      return "no PING echo (is it a v2 TCPStore server?): " + describe(ec);
    }
  }
}

std::string StoreConnection::busyNotice() {
  if (!firstReply_) return {};
  const wire::BusyNotice notice = wire::decodeBusyNotice(in_);
  if (notice.kind == wire::BusyNotice::Kind::kNone) firstReply_ = false;
  if (notice.kind != wire::BusyNotice::Kind::kNotice) return {};
  overloaded_ = true;
  return "store overloaded: " + notice.reason;
}

void StoreConnection::throwIfFailed() const {
  if (failure_) std::rethrow_exception(failure_);
}

void StoreConnection::markFailed(std::exception_ptr error) {
  if (!failure_) failure_ = std::move(error);
  if (!farewell_.empty() && socket_.isOpen()) {
    (void)socket_.writeAll(farewell_, Clock::now());  // never waits; the server may be gone
  }
  socket_.close();
}

void StoreConnection::failNetwork(const std::string& what, const error_code& ec) {
  closedByServer_ = ec == asio::error::eof || ec == asio::error::connection_reset;
  lost_ = !failure_;
  const NetworkError error("connection to the store at " + endpoint_ + " failed during " + what +
                           ": " + describe(ec));
  markFailed(std::make_exception_ptr(error));
  throw error;
}

void StoreConnection::send(const wire::Request& request, Clock::time_point deadline,
                           const std::string& what) {
  throwIfFailed();
  out_.clear();
  wire::encodeRequest(out_, dialect_, request);
  if (const error_code ec = socket_.writeAll(out_, deadline)) failNetwork(what, ec);
}

void StoreConnection::sendRaw(std::string_view bytes, Clock::time_point deadline,
                              const std::string& what) {
  throwIfFailed();
  if (const error_code ec = socket_.writeAll(bytes, deadline)) failNetwork(what, ec);
}

std::optional<wire::OwnedReply> StoreConnection::receive(wire::Op op, std::size_t keyCount,
                                                         Clock::time_point deadline,
                                                         const std::string& what, int interruptFd) {
  throwIfFailed();
  for (;;) {
    if (std::string busy = busyNotice(); !busy.empty()) {  // v1: no handshake came first
      const OverloadedError error("the store at " + endpoint_ + " refused " + what + ": " + busy);
      markFailed(std::make_exception_ptr(error));
      throw error;
    }
    const auto result = wire::decodeReply(in_, op, keyCount, options_.maxValueBytes);
    if (const auto* reply = std::get_if<wire::Reply>(&result)) {
      wire::OwnedReply owned = wire::toOwned(*reply);
      in_.erase(0, reply->size);
      return owned;
    }
    if (const auto* bad = std::get_if<wire::Malformed>(&result)) {
      const ProtocolError error("bad reply from the store at " + endpoint_ + " to " + what + ": " +
                                bad->reason);
      markFailed(std::make_exception_ptr(error));
      throw error;
    }
    const error_code ec = socket_.readSome(in_, deadline, interruptFd);
    if (ec == asio::error::timed_out) return std::nullopt;
    if (ec) failNetwork(what, ec);
  }
}

wire::OwnedReply StoreConnection::expect(wire::Op op, std::size_t keyCount,
                                         Clock::time_point deadline,
                                         std::chrono::milliseconds budget,
                                         const std::string& what) {
  if (auto reply = receive(op, keyCount, deadline, what)) return std::move(*reply);
  const std::string message = "timed out after " + durationText(budget) +
                              " waiting for the reply to " + what + " from " + endpoint_;
  markFailed(std::make_exception_ptr(
      NetworkError("connection to the store at " + endpoint_ + " is unusable: an earlier " +
                   message + " (a late reply would be taken for the next one)")));
  throw TimeoutError(message);
}

}  // namespace ddp::detail
