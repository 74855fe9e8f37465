// SessionStream: the byte stream under a StoreSession — a plain TCP socket, or TLS over one
// (Boost.Asio SSL). The session reads and writes through it without knowing which; Admission
// (admission.hpp) decides which one a connection gets and completes the TLS handshake first.
//
// Thread safety: the owning session's io_context thread only.
#pragma once

#include <cstddef>
#include <functional>
#include <memory>
#include <vector>

#include <boost/asio/buffer.hpp>
#include <boost/asio/ip/tcp.hpp>
#include <boost/asio/ssl/stream.hpp>

namespace ddp::detail {

class SessionStream {
 public:
  using Socket = boost::asio::ip::tcp::socket;
  using TlsStream = boost::asio::ssl::stream<Socket>;
  using Handler = std::function<void(const boost::system::error_code&, std::size_t)>;

  explicit SessionStream(Socket socket);
  // A TLS stream whose handshake is complete.
  explicit SessionStream(std::unique_ptr<TlsStream> tls);
  SessionStream(SessionStream&&) noexcept;
  ~SessionStream();

  // The TCP layer (endpoints, options, executor).
  Socket& socket();
  bool isTls() const { return tls_ != nullptr; }

  using Buffers = std::vector<boost::asio::const_buffer>;

  // As Asio's async_read_some / async_write (every byte, one gather write) on the stream.
  // Non-blocking; `buffers` (the list, not only the bytes) must live until the handler runs.
  void asyncReadSome(boost::asio::mutable_buffer buffer, Handler handler);
  void asyncWrite(const Buffers& buffers, Handler handler);
  // Hands the socket what it takes now, without waiting (best effort, before a close). Plain
  // connections only: a TLS record cut short would be garbage; does nothing under TLS.
  void writeNow(const Buffers& buffers);
  // True when `ec` from a read means the peer ended the connection in an orderly way: EOF, a
  // reset, or (TLS) a close without close_notify, which is how clients' connections end.
  static bool isEndOfStream(const boost::system::error_code& ec);
  // Closes the TCP connection (no TLS close_notify: peers treat the close as end of stream).
  // Pending operations complete with operation_aborted.
  void close();

 private:
  std::unique_ptr<Socket> plain_;
  std::unique_ptr<TlsStream> tls_;
};

}  // namespace ddp::detail
