// StoreConnection: the one TCP connection under a TcpStoreClient.
//
// It connects (every resolved address, Backoff between rounds, all within connectTimeout), puts TLS
// over the connection when options.tls asks for it (the server's certificate checked against the
// CA and the host name), does the v2 handshake (VALIDATE magic, PING with the pid as nonce, echo checked), sends encoded
// requests and reads replies under deadlines. Socket and protocol failures become ddp::Error
// naming the endpoint and the request; they are sticky: the socket is closed and every later use
// rethrows the first failure. Before that close it writes the farewell bytes, if any, without
// waiting (ddprun's ON_CLOSE_CLEAR: a connection this process gives up on must not look like a
// dead process to the server, which still reads the requests sent before).
//
// Thread safety: none; TcpStoreClient serialises access.
#pragma once

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <exception>
#include <optional>
#include <string>
#include <vector>

#include <boost/asio/io_context.hpp>
#include <boost/asio/ssl/context.hpp>

#include "rendezvous/base/duration_text.hpp"
#include "rendezvous/store/detail/deadline_socket.hpp"
#include "rendezvous/store/tcp_store_client.hpp"
#include "rendezvous/wire/wire_codec.hpp"

namespace ddp::detail {

// now + budget, saturating (a budget of milliseconds::max() means "no deadline").
std::chrono::steady_clock::time_point deadlineAfter(std::chrono::milliseconds budget);
// "[a, b]" with non-printable bytes escaped and long keys shortened.
std::string formatKeys(const std::vector<std::string>& keys);

class StoreConnection {
 public:
  using Clock = std::chrono::steady_clock;

  // Connects and handshakes, reporting progress to options.onConnectProgress while attempts
  // fail. Throws TimeoutError summarising the attempts when connectTimeout passes (OverloadedError
  // when an attempt got the server's busy notice: out of descriptors, at its connection limit),
  // NetworkError when the host never resolved within it, ConfigError when the TLS files
  // cannot be used.
  explicit StoreConnection(const TcpStoreClientOptions& options);

  const std::string& endpoint() const { return endpoint_; }
  wire::Dialect dialect() const { return dialect_; }

  // Rethrows the sticky failure, if any.
  void throwIfFailed() const;
  // True once a sticky failure is set.
  bool failed() const { return failure_ != nullptr; }

  // Encodes and writes `request`. `what` names it for errors ("GET of key 'k'"). Throws
  // NetworkError / TimeoutError (both leave the connection failed).
  void send(const wire::Request& request, Clock::time_point deadline, const std::string& what);

  // Reads the reply to a request of kind `op`. nullopt when `deadline` passes first, or when
  // `interruptFd` (-1: none) becomes readable first (the connection stays open: the caller
  // decides). Throws NetworkError / ProtocolError (sticky).
  std::optional<wire::OwnedReply> receive(wire::Op op, std::size_t keyCount,
                                          Clock::time_point deadline, const std::string& what,
                                          int interruptFd = -1);

  // receive(), but a passed deadline throws TimeoutError naming `what` and `budget` and leaves
  // the connection failed (a late reply would be read as the answer to the next request).
  wire::OwnedReply expect(wire::Op op, std::size_t keyCount, Clock::time_point deadline,
                          std::chrono::milliseconds budget, const std::string& what);

  // Closes the socket (after the farewell bytes); later calls throw `error` (a NetworkError or
  // ProtocolError).
  void markFailed(std::exception_ptr error);

  // Bytes written, best effort and without waiting, when a failure closes the connection.
  void setFarewell(std::string bytes) { farewell_ = std::move(bytes); }
  // True once the failure was the server closing the connection (EOF or reset).
  bool closedByServer() const { return closedByServer_; }
  // True once the connection failed at the socket (closed, reset, broken): the server may have
  // gone; a fresh connection may work. False for protocol errors and timeouts.
  bool lost() const { return lost_; }
  // Writes bytes already encoded (several requests). Throws as send().
  void sendRaw(std::string_view bytes, Clock::time_point deadline, const std::string& what);

 private:
  // One connect + handshake attempt to one address; returns an error text, empty on success.
  std::string attempt(const boost::asio::ip::tcp::endpoint& address, Clock::time_point deadline);
  std::string handshake(Clock::time_point deadline);
  // While the first reply is awaited: "store overloaded: <reason>" once in_ holds a whole busy
  // notice (wire_codec.hpp), else "".
  std::string busyNotice();
  [[noreturn]] void failNetwork(const std::string& what, const boost::system::error_code& ec);

  TcpStoreClientOptions options_;
  std::shared_ptr<boost::asio::ssl::context> tls_;  // set when options_.tls is enabled
  std::string endpoint_;
  wire::Dialect dialect_;
  boost::asio::io_context io_;
  DeadlineSocket socket_;
  std::string in_;   // received bytes not yet consumed
  std::string out_;  // scratch for encoding
  std::string farewell_;
  std::exception_ptr failure_;
  bool firstReply_ = true;   // nothing but a busy notice was read yet
  bool overloaded_ = false;  // the last attempt got a busy notice
  bool closedByServer_ = false;
  bool lost_ = false;
};

}  // namespace ddp::detail
