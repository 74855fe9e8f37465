// DeadlineSocket: a TCP connection whose blocking calls end at a caller-given deadline.
//
// The socket is an Asio socket in non-blocking mode; a call that would block waits in poll(2) on
// the native handle for at most the time left before the deadline. Results are error codes
// (asio::error::timed_out when the deadline passes, asio::error::eof when the peer closed):
// callers turn them into ddp::Error with context. TCP_NODELAY is set once connected; the socket is
// close-on-exec, so no child process keeps the connection open after this process is gone.
//
// Thread safety: one thread at a time (TcpStoreClient serialises its callers).
#pragma once

#include <chrono>
#include <memory>
#include <string>
#include <string_view>

#include <boost/asio/io_context.hpp>
#include <boost/asio/ip/tcp.hpp>
#include <boost/system/error_code.hpp>

typedef struct ssl_st SSL;
typedef struct ssl_ctx_st SSL_CTX;

namespace ddp::detail {

class DeadlineSocket {
 public:
  using Clock = std::chrono::steady_clock;

  explicit DeadlineSocket(boost::asio::io_context& io);
  ~DeadlineSocket();

  // Opens a socket and connects it to `endpoint`, blocking until `deadline` at most. On failure
  // the socket is closed again and the error returned.
  boost::system::error_code connect(const boost::asio::ip::tcp::endpoint& endpoint,
                                    Clock::time_point deadline);

  // TLS client handshake over the connected socket, verifying the server's certificate against
  // `context`'s CA and `host` (a DNS name or an IP literal). Blocks until `deadline`. Returns
  // an error text ("" on success); on failure the socket is closed.
  std::string startTls(SSL_CTX* context, const std::string& host, Clock::time_point deadline);

  // Writes every byte of `bytes`; blocks until done or `deadline`.
  boost::system::error_code writeAll(std::string_view bytes, Clock::time_point deadline);

  // Appends at least one received byte to `buffer` (as many as are available, up to 64 KiB);
  // blocks until data arrives, the peer closes (eof) or `deadline`. When `interruptFd` (e.g. an
  // eventfd; -1 for none) becomes readable first it returns timed_out as at the deadline (the
  // caller drains that fd).
  boost::system::error_code readSome(std::string& buffer, Clock::time_point deadline,
                                     int interruptFd = -1);

  bool isOpen() const { return socket_.is_open(); }
  bool isTls() const { return ssl_ != nullptr; }
  void close();

 private:
  // Waits in poll(2) until the socket reports `events` (or an error/hang-up); false at deadline
  // or when `interruptFd` is readable.
  bool waitFor(short events, Clock::time_point deadline, boost::system::error_code& ec,
               int interruptFd = -1);

  // TLS: waits for what OpenSSL's last call (result `rc`) asks for; false at the deadline or
  // interrupt, with `ec` set for a failure.
  bool waitForTls(int rc, Clock::time_point deadline, boost::system::error_code& ec,
                  int interruptFd = -1);
  boost::system::error_code tlsWriteAll(std::string_view bytes, Clock::time_point deadline);
  boost::system::error_code tlsReadSome(std::string& buffer, Clock::time_point deadline,
                                        int interruptFd);

  boost::asio::ip::tcp::socket socket_;
  SSL* ssl_ = nullptr;  // owned; set by startTls()
};

}  // namespace ddp::detail
