// DroppingProxy: a TCP proxy in front of a store server that, on command, swallows the server's
// next reply and cuts that connection — the server applied the request, the client never hears
// of it (a daemon that died between applying and replying). New connections go through again.
//
// Thread safety: armDropNextReply() and connections() from any thread; the proxy's threads are
// joined by the destructor.
#pragma once

#include <arpa/inet.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <atomic>
#include <cstdint>
#include <mutex>
#include <stdexcept>
#include <string>
#include <string_view>
#include <thread>
#include <vector>

namespace ddp::test {

class DroppingProxy {
 public:
  explicit DroppingProxy(uint16_t upstreamPort) : upstream_(upstreamPort) {
    listenFd_ = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    sockaddr_in addr = loopback(0);
    if (::bind(listenFd_, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)) != 0 ||
        ::listen(listenFd_, 16) != 0) {
      throw std::runtime_error("proxy: cannot listen");
    }
    socklen_t len = sizeof(addr);
    ::getsockname(listenFd_, reinterpret_cast<sockaddr*>(&addr), &len);
    port_ = ntohs(addr.sin_port);
    acceptor_ = std::thread([this] { acceptLoop(); });
  }
  ~DroppingProxy() {
    stop_ = true;
    acceptor_.join();
    std::lock_guard<std::mutex> lock(mutex_);
    for (auto& t : pumps_) t.join();
    ::close(listenFd_);
  }
  DroppingProxy(const DroppingProxy&) = delete;
  DroppingProxy& operator=(const DroppingProxy&) = delete;

  uint16_t port() const { return port_; }
  // The next bytes the server sends on any connection are dropped and that connection is cut;
  // with `request` given, only those that answer a client chunk containing it (an HTTP path).
  void armDropNextReply(const std::string& request = {}) {
    std::lock_guard<std::mutex> lock(patternMutex_);
    pattern_ = request;
    drop_ = request.empty();
    armed_ = !request.empty();
  }
  int connections() const { return connections_.load(); }

 private:
  static sockaddr_in loopback(uint16_t port) {
    sockaddr_in addr{};
    addr.sin_family = AF_INET;
    addr.sin_port = htons(port);
    addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    return addr;
  }

  void acceptLoop() {
    while (!stop_) {
      pollfd p{listenFd_, POLLIN, 0};
      if (::poll(&p, 1, 50) <= 0) continue;
      const int client = ::accept4(listenFd_, nullptr, nullptr, SOCK_CLOEXEC);
      if (client < 0) continue;
      const int server = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
      sockaddr_in addr = loopback(upstream_);
      if (::connect(server, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)) != 0) {
        ::close(server);
        ::close(client);
        continue;
      }
      ++connections_;
      std::lock_guard<std::mutex> lock(mutex_);
      pumps_.emplace_back([this, client, server] { pump(client, server); });
    }
  }

  // True when the client chunk `bytes` is the request whose reply is to be dropped.
  bool matches(std::string_view bytes) {
    if (!armed_) return false;
    std::lock_guard<std::mutex> lock(patternMutex_);
    if (!armed_ || bytes.find(pattern_) == std::string_view::npos) return false;
    armed_ = false;
    return true;
  }

  void pump(int client, int server) {
    char buffer[65536];
    bool dropHere = false;
    while (!stop_) {
      pollfd p[2] = {{client, POLLIN, 0}, {server, POLLIN, 0}};
      if (::poll(p, 2, 50) <= 0) continue;
      if (p[0].revents != 0) {
        const ssize_t n = ::read(client, buffer, sizeof(buffer));
        if (n <= 0 || ::write(server, buffer, static_cast<std::size_t>(n)) != n) break;
        if (matches(std::string_view(buffer, static_cast<std::size_t>(n)))) dropHere = true;
      }
      if (p[1].revents != 0) {
        const ssize_t n = ::read(server, buffer, sizeof(buffer));
        if (n <= 0 || dropHere || drop_.exchange(false)) break;
        if (::write(client, buffer, static_cast<std::size_t>(n)) != n) break;
      }
    }
    ::close(client);
    ::close(server);
  }

  uint16_t upstream_;
  uint16_t port_ = 0;
  int listenFd_ = -1;
  std::atomic<bool> stop_{false};
  std::atomic<bool> drop_{false};
  std::atomic<bool> armed_{false};
  std::mutex patternMutex_;
  std::string pattern_;  // Guarded by patternMutex_
  std::atomic<int> connections_{0};
  std::thread acceptor_;
  std::mutex mutex_;
  std::vector<std::thread> pumps_;  // Guarded by mutex_
};

}  // namespace ddp::test
