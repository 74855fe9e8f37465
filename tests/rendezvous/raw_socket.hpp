// RawSocket: a tiny blocking TCP client for tests that speak raw TCPStore bytes to a server.
//
// Every read has a deadline (poll); failures throw std::runtime_error naming what was awaited.
// Thread safety: none; one test thread per socket.
#pragma once

#include <arpa/inet.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <cstdint>
#include <cstring>
#include <stdexcept>
#include <string>
#include <string_view>

namespace ddp::test {

class RawSocket {
 public:
  // Connects to host:port (an IPv4 or IPv6 literal), from the local address `source` when given
  // (e.g. 127.0.0.2, to come from outside an allowlist). Throws on failure.
  explicit RawSocket(uint16_t port, const std::string& host = "127.0.0.1",
                     const std::string& source = "") {
    sockaddr_storage addr{};
    socklen_t len = 0;
    auto* v4 = reinterpret_cast<sockaddr_in*>(&addr);
    auto* v6 = reinterpret_cast<sockaddr_in6*>(&addr);
    if (::inet_pton(AF_INET, host.c_str(), &v4->sin_addr) == 1) {
      v4->sin_family = AF_INET;
      v4->sin_port = htons(port);
      len = sizeof(sockaddr_in);
    } else if (::inet_pton(AF_INET6, host.c_str(), &v6->sin6_addr) == 1) {
      v6->sin6_family = AF_INET6;
      v6->sin6_port = htons(port);
      len = sizeof(sockaddr_in6);
    } else {
      throw std::runtime_error("RawSocket: not an address literal: " + host);
    }
    fd_ = ::socket(addr.ss_family, SOCK_STREAM | SOCK_CLOEXEC, 0);
    if (fd_ < 0) throw std::runtime_error(std::string("socket: ") + std::strerror(errno));
    if (!source.empty()) bindSource(source, addr.ss_family);
    if (::connect(fd_, reinterpret_cast<sockaddr*>(&addr), len) != 0) {
      const int err = errno;
      ::close(fd_);
      throw std::runtime_error("connect to " + host + ":" + std::to_string(port) + ": " +
                               std::strerror(err));
    }
    int one = 1;
    ::setsockopt(fd_, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
  }
  ~RawSocket() { close(); }
  RawSocket(const RawSocket&) = delete;
  RawSocket& operator=(const RawSocket&) = delete;

  void close() {
    if (fd_ >= 0) ::close(fd_);
    fd_ = -1;
  }

  // Sends all bytes. Throws when the peer is gone.
  void send(std::string_view bytes) {
    while (!bytes.empty()) {
      const ssize_t n = ::send(fd_, bytes.data(), bytes.size(), MSG_NOSIGNAL);
      if (n < 0 && errno == EINTR) continue;
      if (n <= 0) throw std::runtime_error(std::string("send: ") + std::strerror(errno));
      bytes.remove_prefix(static_cast<std::size_t>(n));
    }
  }

  // Receives exactly n bytes within `timeout`. Throws on timeout, EOF or error.
  std::string recv(std::size_t n, std::chrono::milliseconds timeout = std::chrono::seconds(10)) {
    std::string out(n, '\0');
    std::size_t got = 0;
    const auto deadline = std::chrono::steady_clock::now() + timeout;
    while (got < n) {
      if (!readable(deadline)) {
        throw std::runtime_error("timed out after " + std::to_string(timeout.count()) +
                                 " ms with " + std::to_string(got) + " of " + std::to_string(n) +
                                 " reply bytes");
      }
      const ssize_t r = ::recv(fd_, out.data() + got, n - got, 0);
      if (r < 0 && errno == EINTR) continue;
      if (r == 0) throw std::runtime_error("peer closed the connection after " +
                                           std::to_string(got) + " of " + std::to_string(n) +
                                           " reply bytes");
      if (r < 0) throw std::runtime_error(std::string("recv: ") + std::strerror(errno));
      got += static_cast<std::size_t>(r);
    }
    return out;
  }

  // Every byte received until the peer closes (EOF or reset); throws when it has not closed
  // within `timeout`.
  std::string recvUntilClosed(std::chrono::milliseconds timeout = std::chrono::seconds(10)) {
    const auto deadline = std::chrono::steady_clock::now() + timeout;
    std::string out;
    char buf[4096];
    while (readable(deadline)) {
      const ssize_t r = ::recv(fd_, buf, sizeof(buf), 0);
      if (r < 0 && errno == EINTR) continue;
      if (r <= 0) return out;
      out.append(buf, static_cast<std::size_t>(r));
    }
    throw std::runtime_error("the peer did not close within " + std::to_string(timeout.count()) +
                             " ms (received " + std::to_string(out.size()) + " bytes)");
  }

  // True when the peer closes (EOF or reset) within `timeout`; bytes received before are dropped.
  bool closedByPeer(std::chrono::milliseconds timeout = std::chrono::seconds(10)) {
    const auto deadline = std::chrono::steady_clock::now() + timeout;
    char buf[4096];
    while (readable(deadline)) {
      const ssize_t r = ::recv(fd_, buf, sizeof(buf), 0);
      if (r == 0 || (r < 0 && errno != EINTR && errno != EAGAIN)) return true;
    }
    return false;
  }

 private:
  void bindSource(const std::string& source, int family) {
    sockaddr_storage local{};
    socklen_t len = 0;
    if (family == AF_INET) {
      auto* v4 = reinterpret_cast<sockaddr_in*>(&local);
      v4->sin_family = AF_INET;
      len = sizeof(sockaddr_in);
      if (::inet_pton(AF_INET, source.c_str(), &v4->sin_addr) != 1) len = 0;
    } else {
      auto* v6 = reinterpret_cast<sockaddr_in6*>(&local);
      v6->sin6_family = AF_INET6;
      len = sizeof(sockaddr_in6);
      if (::inet_pton(AF_INET6, source.c_str(), &v6->sin6_addr) != 1) len = 0;
    }
    if (len == 0 || ::bind(fd_, reinterpret_cast<sockaddr*>(&local), len) != 0) {
      const int err = errno;
      ::close(fd_);
      throw std::runtime_error("bind to the source address " + source + ": " + std::strerror(err));
    }
  }

  bool readable(std::chrono::steady_clock::time_point deadline) {
    for (;;) {
      const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(
          deadline - std::chrono::steady_clock::now());
      if (left.count() <= 0) return false;
      pollfd p{fd_, POLLIN, 0};
      const int r = ::poll(&p, 1, static_cast<int>(left.count()));
      if (r < 0 && errno == EINTR) continue;
      return r > 0;
    }
  }

  int fd_ = -1;
};

}  // namespace ddp::test
