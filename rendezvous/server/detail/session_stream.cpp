#include "rendezvous/server/detail/session_stream.hpp"

#include <utility>

#include <boost/asio/ssl/error.hpp>
#include <boost/asio/write.hpp>

namespace ddp::detail {
namespace asio = boost::asio;

SessionStream::SessionStream(Socket socket) : plain_(std::make_unique<Socket>(std::move(socket))) {}

SessionStream::SessionStream(std::unique_ptr<TlsStream> tls) : tls_(std::move(tls)) {}

SessionStream::SessionStream(SessionStream&&) noexcept = default;

SessionStream::~SessionStream() = default;

SessionStream::Socket& SessionStream::socket() { return tls_ ? tls_->next_layer() : *plain_; }

void SessionStream::asyncReadSome(asio::mutable_buffer buffer, Handler handler) {
  if (tls_) return tls_->async_read_some(buffer, std::move(handler));
  plain_->async_read_some(buffer, std::move(handler));
}

void SessionStream::asyncWrite(const Buffers& buffers, Handler handler) {
  if (tls_) return asio::async_write(*tls_, buffers, std::move(handler));
  asio::async_write(*plain_, buffers, std::move(handler));
}

void SessionStream::writeNow(const Buffers& buffers) {
  if (tls_) return;
  boost::system::error_code ignored;
  plain_->non_blocking(true, ignored);
  plain_->write_some(buffers, ignored);
}

bool SessionStream::isEndOfStream(const boost::system::error_code& ec) {
  return ec == asio::error::eof || ec == asio::error::connection_reset ||
         ec == asio::ssl::error::stream_truncated;
}

void SessionStream::close() {
  boost::system::error_code ignored;
  socket().close(ignored);
}

}  // namespace ddp::detail
