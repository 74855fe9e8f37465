// The socket scans that abort a Gloo build or communicator (worker_runtime/detail/socket_scan.hpp),
// on real loopback sockets of this process.
#include <catch2/catch.hpp>

#include <arpa/inet.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <thread>
#include <vector>

#include "worker_runtime/detail/socket_scan.hpp"

using namespace std::chrono_literals;

namespace {

// A loopback listener with `backlog`; its address in `where`.
int listenOnLoopback(int backlog, sockaddr_in& where) {
  const int fd = ::socket(AF_INET, SOCK_STREAM, 0);
  where = {};
  where.sin_family = AF_INET;
  where.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  socklen_t len = sizeof(where);
  REQUIRE(::bind(fd, reinterpret_cast<sockaddr*>(&where), len) == 0);
  REQUIRE(::listen(fd, backlog) == 0);
  REQUIRE(::getsockname(fd, reinterpret_cast<sockaddr*>(&where), &len) == 0);
  return fd;
}

int synRetransmits(int fd) {
  tcp_info info{};
  socklen_t len = sizeof(info);
  if (::getsockopt(fd, IPPROTO_TCP, TCP_INFO, &info, &len) != 0) return -1;
  return info.tcpi_state == TCP_SYN_SENT ? info.tcpi_retransmits : -1;
}

}  // namespace

TEST_CASE("a socket opened since the snapshot is listed though it took a closed one's number",
          "[socket_scan]") {
  sockaddr_in where{};
  const int old = listenOnLoopback(1, where);
  const auto before = ddp::detail::socketDescriptors();
  REQUIRE(before.count(old) == 1);
  ::close(old);  // as the retiring thread closes the previous communicator's pairs
  const int fresh = listenOnLoopback(1, where);
  REQUIRE(fresh == old);  // POSIX: the lowest free number
  CHECK(ddp::detail::listenersOpenedSince(before) == std::vector<int>{fresh});
  CHECK(ddp::detail::tcpStatesOpenedSince(before) == "LISTEN 1");
  ::close(fresh);
}

TEST_CASE("a connect no peer answers is shut down once its SYN was sent again", "[socket_scan]") {
  sockaddr_in deaf{};
  const int listener = listenOnLoopback(0, deaf);
  const auto before = ddp::detail::socketDescriptors();
  // Backlog 0: one connection fills the accept queue and the kernel drops every further SYN.
  const int filler = ::socket(AF_INET, SOCK_STREAM, 0);
  REQUIRE(::connect(filler, reinterpret_cast<sockaddr*>(&deaf), sizeof(deaf)) == 0);
  const int connecting = ::socket(AF_INET, SOCK_STREAM | SOCK_NONBLOCK, 0);
  REQUIRE(::connect(connecting, reinterpret_cast<sockaddr*>(&deaf), sizeof(deaf)) == -1);
  REQUIRE(errno == EINPROGRESS);
  REQUIRE(synRetransmits(connecting) == 0);
  CHECK(ddp::detail::shutDownStalledConnects(before) == 0);  // its first SYN may still be answered
  // The kernel retransmits the SYN after its initial timeout (1 s): polled, no event says so.
  const auto deadline = std::chrono::steady_clock::now() + 10s;
  while (synRetransmits(connecting) < 1 && std::chrono::steady_clock::now() < deadline) {
    std::this_thread::sleep_for(20ms);
  }
  REQUIRE(synRetransmits(connecting) >= 1);
  CHECK(ddp::detail::shutDownStalledConnects(before) == 1);  // the filler is connected: left alone
  int error = 0;
  socklen_t len = sizeof(error);
  REQUIRE(::getsockopt(connecting, SOL_SOCKET, SO_ERROR, &error, &len) == 0);
  CHECK(error == ECONNRESET);  // what Gloo's connecting pair reports as its error
  CHECK(synRetransmits(filler) == -1);
  ::close(connecting);
  ::close(filler);
  ::close(listener);
}

namespace {

// A connection from `fd` to `where` (blocking); returns the client socket.
int connectTo(const sockaddr_in& where) {
  const int fd = ::socket(AF_INET, SOCK_STREAM, 0);
  REQUIRE(::connect(fd, reinterpret_cast<const sockaddr*>(&where), sizeof(where)) == 0);
  return fd;
}

bool isShutDown(int fd) {  // a shut-down socket reads EOF at once; a live one has nothing to read
  char c = 0;
  return ::recv(fd, &c, 1, MSG_DONTWAIT) == 0;
}

}  // namespace

TEST_CASE("neither end of a connection to the store counts as a pair", "[socket_scan]") {
  // A process that hosts the store (a test of several ranks) holds the server's end of each rank's
  // store connection: shutting it down as one of a communicator's pairs broke another rank's build
  // ("Broken pipe" during its WAIT), which then waited out its budget.
  sockaddr_in store{};
  const int storeListener = listenOnLoopback(4, store);
  sockaddr_in other{};
  const int otherListener = listenOnLoopback(4, other);
  const auto before = ddp::detail::socketDescriptors();
  const int client = connectTo(store);
  const int served = ::accept(storeListener, nullptr, nullptr);
  const int pair = connectTo(other);
  const int pairPeer = ::accept(otherListener, nullptr, nullptr);
  REQUIRE(served >= 0);
  REQUIRE(pairPeer >= 0);
  auto found = ddp::detail::connectionsOpenedSince(before, ntohs(store.sin_port));
  std::sort(found.begin(), found.end());
  std::vector<int> want{pair, pairPeer};
  std::sort(want.begin(), want.end());
  CHECK(found == want);
  for (int fd : {client, served, pair, pairPeer, storeListener, otherListener}) ::close(fd);
}

TEST_CASE("a socket kept for a later shutdown is left alone once its number holds another",
          "[socket_scan]") {
  sockaddr_in where{};
  const int listener = listenOnLoopback(4, where);
  const int first = connectTo(where);
  const int firstPeer = ::accept(listener, nullptr, nullptr);
  const auto kept = ddp::detail::identify({first});
  REQUIRE(kept.size() == 1);
  ::close(first);  // its owner closed it; the number goes to the next socket made
  const int second = connectTo(where);
  const int secondPeer = ::accept(listener, nullptr, nullptr);
  REQUIRE(second == first);
  ddp::detail::shutDownSame(kept);
  CHECK_FALSE(isShutDown(secondPeer));  // the stranger with the reused number still works
  const auto now = ddp::detail::identify({second});
  ddp::detail::shutDownSame(now);
  CHECK(isShutDown(secondPeer));  // the same socket is shut down
  for (int fd : {firstPeer, second, secondPeer, listener}) ::close(fd);
}
