// The real ddprund binary under memory pressure and abuse (issue 11, "bounded by construction"):
// an address-space cap (prlimit --as) it must never die under, the resident memory of idle
// connections and of a value being received, and a flood of bad connections in its log.
#include <catch2/catch.hpp>

#include <sys/resource.h>

#include <chrono>
#include <cstdint>
#include <cstring>
#include <memory>
#include <regex>
#include <string>
#include <vector>

#include "tests/rendezvous/daemon/ddprund_process.hpp"
#include "tests/rendezvous/raw_socket.hpp"

namespace {

using namespace std::chrono_literals;
using ddp::test::Daemon;
using ddp::test::RawSocket;

// VmRSS of `pid` in KiB.
long rssKiB(pid_t pid) {
  std::ifstream status("/proc/" + std::to_string(pid) + "/status");
  std::string line;
  while (std::getline(status, line)) {
    if (line.rfind("VmRSS:", 0) == 0) return std::stol(line.substr(6));
  }
  return -1;
}

std::string u64(uint64_t v) { return std::string(reinterpret_cast<const char*>(&v), 8); }
std::string str(std::string_view s) { return u64(s.size()) + std::string(s); }

// v1a GETNUMKEYS round trip: every request sent before on `s` has been applied.
int64_t numKeys(RawSocket& s) {
  s.send(std::string(1, '\x06'));
  int64_t n = 0;
  std::memcpy(&n, s.recv(8).data(), 8);
  return n;
}

std::string get(RawSocket& s, std::string_view key) {
  s.send(std::string(1, '\x02') + str(key));
  uint64_t len = 0;
  std::memcpy(&len, s.recv(8).data(), 8);
  return len == 0 ? std::string() : s.recv(len);
}

// Starts ddprund on a free loopback port; `prefix` wraps the command (prlimit).
struct Running {
  explicit Running(const std::string& tag, std::vector<std::string> extra = {},
                   const std::vector<std::string>& prefix = {})
      : portFile(ddp::test::portFilePath(tag)),
        daemon(args(portFile, std::move(extra)), tag, prefix),
        port(ddp::test::waitForPortFile(portFile, daemon)) {}

  static std::vector<std::string> args(const std::string& portFile,
                                       std::vector<std::string> extra) {
    std::vector<std::string> a{"--host", "127.0.0.1", "--port", "0", "--port-file", portFile};
    a.insert(a.end(), extra.begin(), extra.end());
    return a;
  }

  std::string portFile;
  Daemon daemon;
  uint16_t port;
};

// Raises this process's open-file limit (children inherit it); returns the new soft limit.
rlim_t raiseOpenFiles() {
  rlimit r{};
  ::getrlimit(RLIMIT_NOFILE, &r);
  r.rlim_cur = r.rlim_max;
  ::setrlimit(RLIMIT_NOFILE, &r);
  ::getrlimit(RLIMIT_NOFILE, &r);
  return r.rlim_cur;
}

}  // namespace

TEST_CASE("under prlimit --as, values past the budget close their connections, never ddprund",
          "[ddprund][bounds]") {
  // 1.5 GiB of address space: the default budget is half of it. Five clients each send most of a
  // 250 MiB value; the daemon used to die of std::bad_alloc, losing every job's keys.
  Running d("ascap", {}, {"prlimit", "--as=" + std::to_string(1536ull << 20), "--"});
  RawSocket keeper(d.port);
  keeper.send(std::string(1, '\x00') + str("/kept") + str("yes"));
  REQUIRE(numKeys(keeper) == 1);
  std::vector<std::unique_ptr<RawSocket>> senders;
  const std::string chunk(16 << 20, 'x');
  int refused = 0;
  for (int i = 0; i < 5; ++i) {
    senders.push_back(std::make_unique<RawSocket>(d.port));
    auto& s = *senders.back();
    try {
      s.send(std::string(1, '\x00') + str("/big" + std::to_string(i)) + u64(250ull << 20));
      for (int part = 0; part < 15; ++part) s.send(chunk);  // 240 of the 250 MiB
    } catch (const std::exception&) {
      ++refused;  // closed by the server while sending: refused
    }
  }
  CHECK(get(keeper, "/kept") == "yes");
  CHECK_FALSE(d.daemon.exitCode(0ms));
  CHECK(refused >= 1);
  CHECK_THAT(d.daemon.err(), Catch::Contains("does not fit in the memory budget"));
  senders.clear();
  CHECK(numKeys(keeper) == 1);  // the partial values went with their connections
  d.daemon.signal(SIGTERM);
  CHECK(d.daemon.exitCode(20s) == 0);
}

TEST_CASE("an idle connection costs ddprund at most 4 KiB", "[ddprund][bounds]") {
  const rlim_t files = raiseOpenFiles();
  const int n = files >= 4200 ? 2000 : static_cast<int>(files / 2) - 100;
  REQUIRE(n >= 500);
  Running d("idle");
  std::vector<std::unique_ptr<RawSocket>> conns;
  conns.push_back(std::make_unique<RawSocket>(d.port));
  numKeys(*conns.back());
  const long before = rssKiB(d.daemon.pid());
  for (int i = 1; i <= n; ++i) conns.push_back(std::make_unique<RawSocket>(d.port));
  // One request each, so every connection has been accepted and has read once.
  for (int i = 1; i <= n; ++i) conns[i]->send(std::string(1, '\x06'));
  for (int i = 1; i <= n; ++i) conns[i]->recv(8);
  const long after = rssKiB(d.daemon.pid());
  const double perConnection = static_cast<double>(after - before) / n;
  INFO("RSS " << before << " KiB -> " << after << " KiB for " << n << " connections");
  CHECK(perConnection <= 4.0);
}

TEST_CASE("a value being received costs ddprund its size, not twice that", "[ddprund][bounds]") {
  Running d("partial");
  RawSocket c(d.port);
  numKeys(c);
  const long before = rssKiB(d.daemon.pid());
  constexpr std::size_t kValue = 128 << 20;
  c.send(std::string(1, '\x00') + str("/big") + u64(kValue));
  c.send(std::string(kValue / 2, 'v'));
  // Most of the half sent has been read once the resident memory grew by 90% of it.
  const auto deadline = std::chrono::steady_clock::now() + 20s;
  while (rssKiB(d.daemon.pid()) - before < static_cast<long>(kValue / 2 / 1024 * 9 / 10)) {
    REQUIRE(std::chrono::steady_clock::now() < deadline);
    std::this_thread::sleep_for(5ms);
  }
  CHECK(rssKiB(d.daemon.pid()) - before <= static_cast<long>(kValue / 2 / 1024 * 11 / 10));
  c.send(std::string(kValue / 2, 'v'));
  CHECK(numKeys(c) == 1);
  CHECK(rssKiB(d.daemon.pid()) - before <= static_cast<long>(kValue / 1024 * 11 / 10));
}

TEST_CASE("a flood of bad connections leaves a few log lines and a count", "[ddprund][bounds]") {
  Running d("flood");
  constexpr int kBad = 1000;
  for (int i = 0; i < kBad; ++i) {
    RawSocket bad(d.port);
    bad.send(std::string(1, '\x2a'));  // unknown opcode
    REQUIRE(bad.closedByPeer());
  }
  d.daemon.signal(SIGTERM);
  REQUIRE(d.daemon.exitCode(20s) == 0);
  const std::string err = d.daemon.err();
  int lines = 0;
  long suppressed = 0;
  std::istringstream in(err);
  std::string line;
  const std::regex count(R"(\(?(\d+) similar warnings? suppressed)");
  while (std::getline(in, line)) {
    if (line.find("closing connection") != std::string::npos) ++lines;
    std::smatch m;
    if (std::regex_search(line, m, count)) suppressed += std::stol(m[1]);
  }
  INFO(err.substr(0, 2000));
  CHECK(lines >= 10);
  CHECK(lines <= 100);  // 10 per 10 s: far fewer than 1000 even on a slow machine
  CHECK(lines + suppressed == kBad);
}
