// The real ddprund binary at its descriptor limit (issue 18 item 2): under prlimit --nofile it
// raises a low soft limit to the hard one and serves every client; at a low hard limit, and past
// --max-connections, every client it cannot serve is told why (a busy notice naming the limit),
// a TcpStoreClient reports "store overloaded", the log and /metrics say so, and the daemon
// serves again once connections close.
#include <catch2/catch.hpp>

#include <sys/resource.h>

#include <chrono>
#include <cstdint>
#include <cstring>
#include <memory>
#include <regex>
#include <string>
#include <thread>
#include <vector>

#include "tests/rendezvous/daemon/ddprund_process.hpp"
#include "tests/rendezvous/raw_socket.hpp"
#include "rendezvous/base/error.hpp"
#include "rendezvous/store/tcp_store_client.hpp"

namespace {

using namespace std::chrono_literals;
using ddp::test::Daemon;
using ddp::test::RawSocket;

constexpr uint32_t kNonce = 0x5EC0;

// ddprund on a free loopback port with its status pages on another; `prefix` wraps the command.
struct Running {
  Running(const std::string& tag, std::vector<std::string> extra,
          const std::vector<std::string>& prefix)
      : portFile(ddp::test::portFilePath(tag)),
        httpPortFile(ddp::test::portFilePath(tag + "-http")),
        daemon(args(portFile, httpPortFile, std::move(extra)), tag, prefix),
        port(ddp::test::waitForPortFile(portFile, daemon)),
        httpPort(ddp::test::waitForPortFile(httpPortFile, daemon)) {}

  static std::vector<std::string> args(const std::string& portFile, const std::string& httpFile,
                                       std::vector<std::string> extra) {
    std::vector<std::string> a{"--host", "127.0.0.1", "--port", "0", "--port-file", portFile,
                               "--http-port-file", httpFile};  // --port 0: a free status port
    a.insert(a.end(), extra.begin(), extra.end());
    return a;
  }

  std::string portFile, httpPortFile;
  Daemon daemon;
  uint16_t port, httpPort;
};

// VALIDATE + PING: what every v2 client sends first.
std::string handshake() {
  std::string out(1, '\x00');
  const uint32_t magic = 0x3C85F7CE;
  out.append(reinterpret_cast<const char*>(&magic), 4);
  out.push_back('\x0d');
  out.append(reinterpret_cast<const char*>(&kNonce), 4);
  return out;
}

// What the daemon answered a handshake: "echo", or the busy notice it sent before closing.
std::string answer(RawSocket& s) {
  const std::string first = s.recv(4, 20s);
  uint32_t echoed = 0;
  std::memcpy(&echoed, first.data(), 4);
  if (echoed == kNonce) return "echo";
  return first + s.recvUntilClosed(20s);
}

using Clients = std::vector<std::unique_ptr<RawSocket>>;

// Opens `n` connections at once, then reads each one's answer; the connections stay open while
// `clients` lives.
std::vector<std::string> answers(uint16_t port, int n, Clients& clients) {
  for (int i = 0; i < n; ++i) {
    clients.push_back(std::make_unique<RawSocket>(port));
    clients.back()->send(handshake());
  }
  std::vector<std::string> out;
  for (auto& c : clients) out.push_back(answer(*c));
  return out;
}

std::vector<std::string> answers(uint16_t port, int n) {
  Clients clients;
  return answers(port, n, clients);
}

int count(const std::vector<std::string>& all, const std::string& prefix) {
  int n = 0;
  for (const auto& a : all) n += a.rfind(prefix, 0) == 0 ? 1 : 0;
  return n;
}

// GET /metrics from the status pages.
std::string metrics(uint16_t httpPort) {
  RawSocket http(httpPort);
  http.send("GET /metrics HTTP/1.0\r\nHost: 127.0.0.1\r\n\r\n");
  return http.recvUntilClosed(20s);
}

// Polls /metrics until it contains `line` (the daemon has seen what the test did), up to 20 s.
bool metricsShow(uint16_t httpPort, const std::string& line) {
  const auto deadline = std::chrono::steady_clock::now() + 20s;
  while (std::chrono::steady_clock::now() < deadline) {
    if (metrics(httpPort).find(line) != std::string::npos) return true;
    std::this_thread::sleep_for(10ms);  // a poll's pace, not a wait for an event
  }
  return false;
}

// Raises this process's open-file limit: the test holds hundreds of sockets.
void raiseOpenFiles() {
  rlimit r{};
  ::getrlimit(RLIMIT_NOFILE, &r);
  r.rlim_cur = r.rlim_max;
  ::setrlimit(RLIMIT_NOFILE, &r);
}

}  // namespace

TEST_CASE("ddprund raises a low soft descriptor limit to the hard one and serves every client",
          "[ddprund][capacity]") {
  raiseOpenFiles();
  Running d("fdsoft", {}, {"prlimit", "--nofile=64:4096", "--"});
  const auto all = answers(d.port, 300);  // five times what 64 descriptors hold
  CHECK(count(all, "echo") == 300);
  CHECK_THAT(d.daemon.err(), Catch::Contains("file descriptors: 4096 (raised from 64 to the hard "
                                             "limit): up to 3840 connections"));
  CHECK_THAT(metrics(d.httpPort), Catch::Contains("process_max_fds 4096") &&
                                      Catch::Contains("ddprund_connections_max 3840"));
}

TEST_CASE("out of descriptors, every client is told so, and ddprund serves again after",
          "[ddprund][capacity]") {
  raiseOpenFiles();
  // An explicit --max-connections above what 48 descriptors hold: accept() itself runs out.
  Running d("fdhard", {"--max-connections", "1000"}, {"prlimit", "--nofile=48:48", "--"});
  CHECK_THAT(d.daemon.err(), Catch::Contains("--max-connections 1000 is more than RLIMIT_NOFILE 48 "
                                             "holds"));
  int busy = 0;  // clients told "out of descriptors"
  {
    Clients open;
    const auto all = answers(d.port, 100, open);
    busy = count(all, "DDPRBUSY ddprund: out of file descriptors (RLIMIT_NOFILE 48, ");
    CHECK(busy > 0);
    CHECK(count(all, "echo") + busy == 100);  // nobody left waiting
    // A store client learns why it is refused, and which limit.
    ddp::TcpStoreClientOptions options;
    options.endpoint.port = d.port;
    options.connectTimeout = 1s;
    try {
      ddp::TcpStoreClient client(options);
      FAIL("a client was served by a daemon without descriptors");
    } catch (const ddp::OverloadedError& e) {
      CHECK_THAT(e.what(), Catch::Contains("store overloaded: ddprund: out of file descriptors "
                                           "(RLIMIT_NOFILE 48"));
      // It tried until its budget ran out, told "out of descriptors" each time.
      std::smatch attempts;
      const std::string what = e.what();
      REQUIRE(std::regex_search(what, attempts, std::regex(R"(\((\d+) attempts?: )")));
      busy += std::stoi(attempts[1]);
    }
  }  // every connection closes
  // The daemon frees a closed connection's descriptor when it reads the close; a client that
  // connects before that is still told "out of descriptors", rightly.
  REQUIRE(metricsShow(d.httpPort, "\nddprund_connections 0\n"));
  const auto after = answers(d.port, 10);
  CHECK(count(after, "echo") == 10);
  CHECK_THAT(d.daemon.err(), Catch::Contains("out of file descriptors (RLIMIT_NOFILE 48") &&
                                 Catch::Contains("told it so"));
  // Refused means a client was there to refuse: accept() fails for want of a descriptor with no
  // client waiting too (Linux takes the descriptor first), and that refuses nobody.
  CHECK_THAT(d.daemon.err(), !Catch::Contains("could not tell it"));
  CHECK_THAT(metrics(d.httpPort),
             Catch::Contains("\nddprund_out_of_descriptors_total " + std::to_string(busy) + "\n"));
}

TEST_CASE("past --max-connections a client is told the limit", "[ddprund][capacity]") {
  Running d("maxconn", {"--max-connections", "2"}, {});
  const auto all = answers(d.port, 4);
  CHECK(count(all, "echo") == 2);
  CHECK(count(all, "DDPRBUSY ddprund: at its connection limit (2 connections open; "
                   "--max-connections)") == 2);
  CHECK_THAT(metrics(d.httpPort), Catch::Contains("ddprund_connections_refused_total 2"));
}
