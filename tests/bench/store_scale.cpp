// store_scale: N simulated ranks initialising against one TCPStore server at once (benchmark
// program, not a test; scripts/bench/store_scale.sh drives it against ddprund and torch 1.13).
//
// Each rank, on its own connection, in the v1a (torch 1.13) dialect on raw sockets:
//   1. connects; SET /scale/addr/<rank> = "10.x.y.z:29500"; ADD /scale/count 1
//   2. the rank whose ADD returns N sets /scale/ready; every rank WAITs for /scale/ready
//   3. for 8 peers (rank + 1, + 2, + 4, ... mod N): WAIT [/scale/addr/<peer>] then GET it
//      (torch's store.get() is exactly that WAIT + GET)
// One thread drives every connection with epoll (level-triggered, non-blocking sockets).
//
// Prints one line:
//   ranks=N finished=F seconds=T p50_ms=A p99_ms=B failed=X
// (latencies: from the start to each rank's last GET reply). Exits 0 when every rank finished.
// --idle-hold S instead has each connection send one GETNUMKEYS, prints the line once all are
// answered, and keeps the connections open (idle) for S seconds: for memory per idle connection.
#include <arpa/inet.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <sys/epoll.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <string>
#include <thread>
#include <vector>

#include <CLI/CLI.hpp>

#include "rendezvous/wire/wire_codec.hpp"

namespace {

using Clock = std::chrono::steady_clock;
using ddp::wire::Op;

struct Options {
  std::string host = "127.0.0.1";
  uint16_t port = 29400;
  int ranks = 1024;
  double timeout = 60.0;  // seconds before giving up on the ranks still running
  int peers = 8;
  int maxConnecting = 0;  // > 0: at most this many ranks between connect and their ADD reply
  double idleHold = 0;    // > 0: idle mode (see above)
};

enum class Phase { kConnecting, kAdd, kReady, kPeerWait, kPeerGet, kDone, kFailed };

struct Rank {
  int fd = -1;
  Phase phase = Phase::kConnecting;
  int peer = 0;          // peers fetched so far
  std::string in;        // reply bytes received, not yet consumed
  std::string out;       // request bytes not yet written
  bool armedOut = true;  // EPOLLOUT registered (until the connect completes and writes drain)
  double doneMs = 0;
};

std::string encode(Op op, std::string_view key, std::string_view value = {}, int64_t n = 0) {
  ddp::wire::Request r;
  r.op = op;
  r.key = key;
  r.value = value;
  r.number = n;
  std::string_view keys[] = {key};
  if (op == Op::kWait) r.keys = keys;
  std::string out;
  ddp::wire::encodeRequest(out, ddp::wire::Dialect::kV1a, r);
  return out;
}

std::string addrKey(int rank) { return "/scale/addr/" + std::to_string(rank); }

class Generator {
 public:
  explicit Generator(const Options& o) : o_(o), ranks_(o.ranks) {
    epoll_ = ::epoll_create1(EPOLL_CLOEXEC);
    ::inet_pton(AF_INET, o.host.c_str(), &addr_.sin_addr);
    addr_.sin_family = AF_INET;
    addr_.sin_port = htons(o.port);
    loopback_ = (ntohl(addr_.sin_addr.s_addr) >> 24) == 127;
  }

  int run() {
    start_ = Clock::now();
    const auto deadline = start_ + std::chrono::duration_cast<Clock::duration>(
                                       std::chrono::duration<double>(o_.timeout));
    startMore();
    std::vector<epoll_event> events(1024);
    while (finished_ + failed_ < o_.ranks && Clock::now() < deadline) {
      const int n = ::epoll_wait(epoll_, events.data(), static_cast<int>(events.size()), 100);
      for (int i = 0; i < n; ++i) onEvent(static_cast<int>(events[i].data.u32), events[i].events);
      startMore();
    }
    return report();
  }

 private:
  void startMore() {
    while (started_ < o_.ranks && (o_.maxConnecting <= 0 || connecting_ < o_.maxConnecting)) {
      const int i = started_++;
      Rank& r = ranks_[i];
      r.fd = ::socket(AF_INET, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
      if (r.fd < 0) return fail(i, "socket");
      int one = 1;
      ::setsockopt(r.fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
      if (loopback_) bindSource(r.fd, i);
      ++connecting_;
      const std::string address = "10." + std::to_string(i >> 16) + "." +
                                  std::to_string((i >> 8) & 255) + "." + std::to_string(i & 255) +
                                  ":29500";
      r.out = o_.idleHold > 0 ? encode(Op::kGetNumKeys, {})
                              : encode(Op::kSet, addrKey(i), address) +
                                    encode(Op::kAdd, "/scale/count", {}, 1);
      if (::connect(r.fd, reinterpret_cast<sockaddr*>(&addr_), sizeof(addr_)) != 0 &&
          errno != EINPROGRESS) {
        return fail(i, "connect");
      }
      epoll_event ev{};
      ev.events = EPOLLIN | EPOLLOUT;
      ev.data.u32 = static_cast<uint32_t>(i);
      ::epoll_ctl(epoll_, EPOLL_CTL_ADD, r.fd, &ev);
    }
  }

  void onEvent(int i, uint32_t events) {
    Rank& r = ranks_[i];
    if (r.phase == Phase::kDone || r.phase == Phase::kFailed) return;
    if (events & (EPOLLERR | EPOLLHUP)) return fail(i, "connection error");
    if ((events & EPOLLOUT) && !flush(i)) return;
    if (events & EPOLLIN) {
      char buf[4096];
      for (;;) {
        const ssize_t n = ::recv(r.fd, buf, sizeof(buf), 0);
        if (n > 0) {
          r.in.append(buf, static_cast<std::size_t>(n));
          if (static_cast<std::size_t>(n) < sizeof(buf)) break;
          continue;
        }
        if (n == 0) return fail(i, "closed by the server");
        if (errno == EAGAIN || errno == EINTR) break;
        return fail(i, "recv");
      }
      while (step(i)) {
      }
    }
  }

  // Consumes one reply if complete and sends the next request; false when waiting for bytes.
  bool step(int i) {
    Rank& r = ranks_[i];
    switch (r.phase) {
      case Phase::kConnecting:
      case Phase::kAdd: {
        if (r.in.size() < 8) return false;
        int64_t count = 0;
        std::memcpy(&count, r.in.data(), 8);
        r.in.erase(0, 8);
        --connecting_;
        if (o_.idleHold > 0) {
          finish(i);
          return false;
        }
        std::string next;
        if (count == o_.ranks) next = encode(Op::kSet, "/scale/ready", "1");
        send(i, next + encode(Op::kWait, "/scale/ready"), Phase::kReady);
        return true;
      }
      case Phase::kReady:
      case Phase::kPeerWait: {
        if (r.in.empty()) return false;
        r.in.erase(0, 1);
        if (r.phase == Phase::kPeerWait) {
          send(i, encode(Op::kGet, addrKey(peerOf(i, r.peer))), Phase::kPeerGet);
        } else {
          send(i, encode(Op::kWait, addrKey(peerOf(i, 0))), Phase::kPeerWait);
        }
        return true;
      }
      case Phase::kPeerGet: {
        uint64_t len = 0;
        if (r.in.size() < 8) return false;
        std::memcpy(&len, r.in.data(), 8);
        if (r.in.size() < 8 + len) return false;
        r.in.erase(0, 8 + len);
        if (++r.peer == std::min(o_.peers, o_.ranks)) {
          finish(i);
          return false;
        }
        send(i, encode(Op::kWait, addrKey(peerOf(i, r.peer))), Phase::kPeerWait);
        return true;
      }
      case Phase::kDone:
      case Phase::kFailed: return false;
    }
    return false;
  }

  // On loopback each rank connects from its own 127.1.x.y, the port picked at connect time
  // (IP_BIND_ADDRESS_NO_PORT): with one source address the kernel's search for a free ephemeral
  // port grows with the ports in use (and in TIME_WAIT from earlier runs), which at 16k
  // connections made connect() itself the bottleneck of the benchmark.
  static void bindSource(int fd, int rank) {
    int one = 1;
    ::setsockopt(fd, IPPROTO_IP, IP_BIND_ADDRESS_NO_PORT, &one, sizeof(one));
    sockaddr_in src{};
    src.sin_family = AF_INET;
    src.sin_addr.s_addr = htonl((127u << 24) | (1u << 16) | static_cast<uint32_t>(rank & 0xffff));
    ::bind(fd, reinterpret_cast<sockaddr*>(&src), sizeof(src));
  }

  int peerOf(int rank, int k) const { return (rank + (1 << k)) % o_.ranks; }

  void send(int i, std::string bytes, Phase next) {
    Rank& r = ranks_[i];
    r.out += bytes;
    r.phase = next;
    flush(i);
  }

  // Writes what is pending; keeps EPOLLOUT armed only while bytes remain. False if it failed.
  bool flush(int i) {
    Rank& r = ranks_[i];
    while (!r.out.empty()) {
      const ssize_t n = ::send(r.fd, r.out.data(), r.out.size(), MSG_NOSIGNAL);
      if (n > 0) {
        r.out.erase(0, static_cast<std::size_t>(n));
        continue;
      }
      if (errno == EAGAIN || errno == EINPROGRESS || errno == ENOTCONN) break;
      fail(i, "send");
      return false;
    }
    if (r.armedOut == !r.out.empty()) return true;
    r.armedOut = !r.out.empty();
    epoll_event ev{};
    ev.events = EPOLLIN | (r.armedOut ? static_cast<uint32_t>(EPOLLOUT) : 0u);
    ev.data.u32 = static_cast<uint32_t>(i);
    ::epoll_ctl(epoll_, EPOLL_CTL_MOD, r.fd, &ev);
    return true;
  }

  void finish(int i) {
    Rank& r = ranks_[i];
    r.phase = Phase::kDone;
    r.doneMs = std::chrono::duration<double, std::milli>(Clock::now() - start_).count();
    ++finished_;
  }

  void fail(int i, const char* what) {
    Rank& r = ranks_[i];
    if (failed_++ == 0) {
      std::fprintf(stderr, "store_scale: rank %d: %s: %s\n", i, what, std::strerror(errno));
    }
    if (r.phase == Phase::kConnecting || r.phase == Phase::kAdd) --connecting_;
    r.phase = Phase::kFailed;
    if (r.fd >= 0) ::close(r.fd);
    r.fd = -1;
  }

  int report() {
    std::vector<double> done;
    for (const auto& r : ranks_) {
      if (r.phase == Phase::kDone) done.push_back(r.doneMs);
    }
    std::sort(done.begin(), done.end());
    if (done.size() != static_cast<std::size_t>(o_.ranks)) {
      // Where the unfinished ranks stand (phases in enum order): says what a timeout waited on.
      int phases[7] = {};
      for (const auto& r : ranks_) ++phases[static_cast<int>(r.phase)];
      std::fprintf(stderr,
                   "store_scale: started %d; connecting %d, add %d, ready %d, peer-wait %d, "
                   "peer-get %d, done %d, failed %d\n",
                   started_, phases[0], phases[1], phases[2], phases[3], phases[4], phases[5],
                   phases[6]);
    }
    auto pct = [&](double p) {
      return done.empty() ? 0.0 : done[std::min(done.size() - 1, static_cast<std::size_t>(p * done.size()))];
    };
    const double seconds = std::chrono::duration<double>(Clock::now() - start_).count();
    const double total = done.size() == static_cast<std::size_t>(o_.ranks) ? done.back() / 1000 : seconds;
    std::printf("ranks=%d finished=%zu seconds=%.2f p50_ms=%.0f p99_ms=%.0f failed=%d\n",
                o_.ranks, done.size(), total, pct(0.50), pct(0.99), failed_);
    std::fflush(stdout);
    if (o_.idleHold > 0) {
      std::this_thread::sleep_for(std::chrono::duration<double>(o_.idleHold));
    }
    for (auto& r : ranks_) {
      if (r.fd >= 0) ::close(r.fd);
    }
    return done.size() == static_cast<std::size_t>(o_.ranks) ? 0 : 1;
  }

  Options o_;
  std::vector<Rank> ranks_;
  sockaddr_in addr_{};
  int epoll_ = -1;
  bool loopback_ = false;
  int started_ = 0;
  int connecting_ = 0;
  int finished_ = 0;
  int failed_ = 0;
  Clock::time_point start_;
};

}  // namespace

int main(int argc, char** argv) {
  Options o;
  CLI::App app{"store_scale: N ranks initialising against one TCPStore server (v1a wire)"};
  app.add_option("--host", o.host, "server IPv4 address");
  app.add_option("--port", o.port, "server port")->required();
  app.add_option("--ranks", o.ranks, "simulated ranks (one connection each)")
      ->check(CLI::Range(1, 1 << 20));
  app.add_option("--timeout", o.timeout, "seconds before giving up");
  app.add_option("--peers", o.peers, "peer addresses each rank fetches")->check(CLI::Range(1, 20));
  app.add_option("--max-connecting", o.maxConnecting,
                 "at most this many ranks between connecting and their first reply (0: all at once)");
  app.add_option("--idle-hold", o.idleHold,
                 "idle mode: one GETNUMKEYS per connection, then hold them open this many seconds");
  CLI11_PARSE(app, argc, argv);
  rlimit files{};
  ::getrlimit(RLIMIT_NOFILE, &files);
  files.rlim_cur = files.rlim_max;
  ::setrlimit(RLIMIT_NOFILE, &files);
  if (files.rlim_cur < static_cast<rlim_t>(o.ranks) + 64) {
    std::fprintf(stderr, "store_scale: %d ranks need %d open files; the limit is %llu\n", o.ranks,
                 o.ranks + 64, static_cast<unsigned long long>(files.rlim_cur));
    return 2;
  }
  return Generator(o).run();
}
