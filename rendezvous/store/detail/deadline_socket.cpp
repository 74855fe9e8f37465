#include "rendezvous/store/detail/deadline_socket.hpp"

#include <fcntl.h>
#include <poll.h>
#include <sys/socket.h>

#include <algorithm>
#include <cerrno>

#include <boost/asio/error.hpp>
#include <openssl/ssl.h>

namespace ddp::detail {

namespace asio = boost::asio;
using boost::system::error_code;

DeadlineSocket::DeadlineSocket(asio::io_context& io) : socket_(io) {}

DeadlineSocket::~DeadlineSocket() { close(); }

void DeadlineSocket::close() {
  if (ssl_ != nullptr) {
    SSL_free(ssl_);  // no close_notify: the peer reads the close as end of stream
    ssl_ = nullptr;
  }
  error_code ignored;
  socket_.close(ignored);
}

bool DeadlineSocket::waitFor(short events, Clock::time_point deadline, error_code& ec,
                             int interruptFd) {
  for (;;) {
    const auto left = std::chrono::ceil<std::chrono::milliseconds>(deadline - Clock::now());
    if (left.count() <= 0) return false;
    pollfd fds[2] = {{socket_.native_handle(), events, 0}, {interruptFd, POLLIN, 0}};
    const int timeoutMs = static_cast<int>(std::min<int64_t>(left.count(), 1 << 30));
    const int rc = ::poll(fds, interruptFd >= 0 ? 2 : 1, timeoutMs);
    if (rc > 0 && fds[0].revents == 0) return false;  // interrupted
    if (rc > 0) return true;  // ready, or an error/hang-up the next syscall reports
    if (rc < 0 && errno != EINTR) {
      ec = error_code(errno, boost::system::system_category());
      return true;
    }
  }
}

error_code DeadlineSocket::connect(const asio::ip::tcp::endpoint& endpoint,
                                   Clock::time_point deadline) {
  error_code ec;
  close();
  socket_.open(endpoint.protocol(), ec);
  if (!ec && ::fcntl(socket_.native_handle(), F_SETFD, FD_CLOEXEC) != 0) {
    ec = error_code(errno, boost::system::system_category());
  }
  if (!ec) socket_.non_blocking(true, ec);
  if (ec) return ec;
  // Asio's synchronous connect would block without a deadline, so connect on the native handle.
  if (::connect(socket_.native_handle(), endpoint.data(), endpoint.size()) != 0) {
    if (errno != EINPROGRESS && errno != EINTR) {
      ec = error_code(errno, boost::system::system_category());
    } else if (!waitFor(POLLOUT, deadline, ec)) {
      ec = asio::error::timed_out;
    } else if (!ec) {
      int soError = 0;
      socklen_t len = sizeof(soError);
      ::getsockopt(socket_.native_handle(), SOL_SOCKET, SO_ERROR, &soError, &len);
      if (soError != 0) ec = error_code(soError, boost::system::system_category());
    }
  }
  if (!ec) socket_.set_option(asio::ip::tcp::no_delay(true), ec);
  if (ec) close();
  return ec;
}

error_code DeadlineSocket::writeAll(std::string_view bytes, Clock::time_point deadline) {
  if (ssl_ != nullptr) return tlsWriteAll(bytes, deadline);
  error_code ec;
  while (!bytes.empty()) {
    const std::size_t n = socket_.write_some(asio::buffer(bytes.data(), bytes.size()), ec);
    if (ec == asio::error::would_block || ec == asio::error::try_again) {
      ec.clear();
      if (!waitFor(POLLOUT, deadline, ec)) return asio::error::timed_out;
      if (ec) return ec;
      continue;
    }
    if (ec) return ec;
    bytes.remove_prefix(n);
  }
  return ec;
}

error_code DeadlineSocket::readSome(std::string& buffer, Clock::time_point deadline,
                                    int interruptFd) {
  if (ssl_ != nullptr) return tlsReadSome(buffer, deadline, interruptFd);
  constexpr std::size_t kChunk = 64 * 1024;
  error_code ec;
  for (;;) {
    const std::size_t old = buffer.size();
    buffer.resize(old + kChunk);
    const std::size_t n = socket_.read_some(asio::buffer(buffer.data() + old, kChunk), ec);
    buffer.resize(old + n);
    if (ec == asio::error::would_block || ec == asio::error::try_again) {
      ec.clear();
      if (!waitFor(POLLIN, deadline, ec, interruptFd)) return asio::error::timed_out;
      if (ec) return ec;
      continue;
    }
    return ec;
  }
}

}  // namespace ddp::detail
