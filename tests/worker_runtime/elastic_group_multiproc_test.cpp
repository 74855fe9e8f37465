// ElasticGroup across processes (Gloo's multiproc tests): ranks are forked processes over real
// loopback TCP, the test is their agent — it owns the worker store and the quorum board, kills
// a rank with SIGKILL, publishes quorums and starts a replacement — and asserts what the
// survivor does within a bounded time, from its exit status and the report it writes on a pipe.
// Every process is forked before the store server's thread starts; a child waits on its pipe for
// the port and ends with _exit.
#include <catch2/catch.hpp>

#include <arpa/inet.h>
#include <netinet/in.h>
#include <poll.h>
#include <signal.h>
#include <sys/mman.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstring>
#include <fstream>
#include <functional>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "rendezvous/base/error.hpp"
#include "rendezvous/quorum/quorum_board.hpp"
#include "rendezvous/server/store_server.hpp"
#include "tests/worker_runtime/quorum_fixture.hpp"
#include "worker_runtime/detail/gloo_store_adapter.hpp"
#include "worker_runtime/elastic_group.hpp"
#include "worker_runtime/worker_store.hpp"

#include <gloo/transport/tcp/address.h>

using namespace std::chrono_literals;
using ddp::test::envFor;
using ddp::test::publishQuorum;

namespace {

// A forked rank: `body(port, report)` runs once the test sends it the store's port; its return
// value is the exit status. `report` is a pipe to the test (say() writes a line on it).
class RankProcess {
 public:
  explicit RankProcess(const std::function<int(uint16_t, int)>& body) {
    int go[2], report[2];
    if (::pipe(go) != 0 || ::pipe(report) != 0) throw std::runtime_error("pipe failed");
    pid_ = ::fork();
    if (pid_ < 0) throw std::runtime_error("fork failed");
    if (pid_ == 0) {
      // The child dies as a process would, not through the test framework's handlers.
      for (int sig : {SIGABRT, SIGSEGV, SIGBUS, SIGILL, SIGFPE, SIGTERM, SIGINT}) {
        ::signal(sig, SIG_DFL);
      }
      ::close(go[1]);
      ::close(report[0]);
      uint16_t port = 0;
      if (::read(go[0], &port, sizeof port) != sizeof port) ::_exit(90);
      int rc = 91;
      try {
        rc = body(port, report[1]);
      } catch (const std::exception& e) {
        say(report[1], std::string("escaped: ") + e.what());
      }
      ::_exit(rc);
    }
    ::close(go[0]);
    ::close(report[1]);
    go_ = go[1];
    report_ = report[0];
  }
  ~RankProcess() {
    if (pid_ > 0 && !reaped_) {
      ::kill(pid_, SIGKILL);
      ::waitpid(pid_, nullptr, 0);
    }
    ::close(go_);
    ::close(report_);
  }

  static void say(int fd, const std::string& line) {
    const std::string out = line + "\n";
    (void)!::write(fd, out.data(), out.size());
  }

  void start(uint16_t port) { (void)!::write(go_, &port, sizeof port); }
  pid_t pid() const { return pid_; }
  // The next line of the report, waiting up to `budget` ("" at its end or past the budget).
  std::string nextLine(std::chrono::milliseconds budget) {
    const auto deadline = std::chrono::steady_clock::now() + budget;
    while (true) {
      const auto eol = buffer_.find('\n');
      if (eol != std::string::npos || ended_) {
        if (eol == std::string::npos) return "";
        std::string line = buffer_.substr(0, eol);
        buffer_.erase(0, eol + 1);
        return line;
      }
      const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(
          deadline - std::chrono::steady_clock::now());
      pollfd p{report_, POLLIN, 0};
      if (left.count() <= 0 || ::poll(&p, 1, int(left.count())) <= 0) return "";
      char chunk[512];
      const ssize_t n = ::read(report_, chunk, sizeof chunk);
      if (n <= 0) {
        ended_ = true;
        return "";
      }
      buffer_.append(chunk, std::size_t(n));
    }
  }
  // The wait status once its report ended (it exited), or -1 past `budget` (it is then killed).
  int exitStatus(std::chrono::milliseconds budget) {
    const auto deadline = std::chrono::steady_clock::now() + budget;
    while (!ended_ && std::chrono::steady_clock::now() < deadline) {
      nextLine(std::chrono::duration_cast<std::chrono::milliseconds>(
          deadline - std::chrono::steady_clock::now()));
    }
    int status = -1;
    if (!ended_) ::kill(pid_, SIGKILL);
    ::waitpid(pid_, ended_ ? &status : nullptr, 0);  // at its end the process is exiting
    reaped_ = true;
    return status;
  }
  void kill() {
    ::kill(pid_, SIGKILL);
    ::waitpid(pid_, nullptr, 0);
    reaped_ = true;
  }

 private:
  pid_t pid_ = -1;
  int go_ = -1;
  int report_ = -1;
  bool reaped_ = false;
  bool ended_ = false;  // the report reached its end: the process closed it as it exited
  std::string buffer_;
};

constexpr std::size_t kHalf = std::size_t(4) << 20;

// A peer that accepts nothing: a loopback listener whose accept queue is full (backlog 0, one
// connection queued), so the kernel drops every further SYN, as for a stopped process's pair.
class DeafListener {
 public:
  DeafListener() {
    listener_ = ::socket(AF_INET, SOCK_STREAM, 0);
    sockaddr_in a{};
    a.sin_family = AF_INET;
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    socklen_t len = sizeof(a);
    if (::bind(listener_, reinterpret_cast<sockaddr*>(&a), len) != 0 || ::listen(listener_, 0) != 0 ||
        ::getsockname(listener_, reinterpret_cast<sockaddr*>(&address_), &len) != 0) {
      throw std::runtime_error("deaf listener: bind/listen failed");
    }
    filler_ = ::socket(AF_INET, SOCK_STREAM, 0);
    if (::connect(filler_, reinterpret_cast<sockaddr*>(&address_), len) != 0) {
      throw std::runtime_error("deaf listener: the filler connection failed");
    }
  }
  ~DeafListener() {
    ::close(filler_);
    ::close(listener_);
  }
  uint16_t port() const { return ntohs(address_.sin_port); }
  // Gloo's bytes for a pair listening here.
  std::vector<char> glooAddress() const {
    sockaddr_storage ss{};
    std::memcpy(&ss, &address_, sizeof(address_));
    return gloo::transport::tcp::Address(ss).bytes();
  }

 private:
  int listener_ = -1;
  int filler_ = -1;
  sockaddr_in address_{};
};

// True when some socket of this network namespace is connecting (SYN-SENT) to 127.0.0.1:port.
bool connectPendingTo(uint16_t port) {
  std::ifstream tcp("/proc/net/tcp");
  std::string line;
  std::getline(tcp, line);  // the header
  char remote[32];
  std::snprintf(remote, sizeof remote, "0100007F:%04X", port);
  while (std::getline(tcp, line)) {
    std::istringstream fields(line);
    std::string slot, local, rem, state;
    fields >> slot >> local >> rem >> state;
    if (rem == remote && state == "02") return true;
  }
  return false;
}

}  // namespace

// The "donor SIGKILLed while it hands its state over": Gloo never wakes a receive whose
// message stopped halfway, so before the abort could reach it the survivor left its process 4 s
// after the newer quorum. Now it abandons the receive and joins the newest quorum, however many
// came in a row, keeping its process.
TEST_CASE("a rank receiving from a peer killed halfway through the message joins the newest "
          "quorum in its own process", "[elastic][multiproc]") {
  ddp::QuorumBoard board(2);
  const std::string boardPath = board.path();
  auto options = ddp::test::glooOptions(20s);
  // The donor: sends a message whose second half it cannot read, so its writev stops there
  // (EFAULT) and the receiver holds half of it when the test SIGKILLs the donor. (When Gloo's
  // device thread is the one writing, Gloo throws there and the donor dies at once: the same
  // half message for the receiver.)
  RankProcess donor([&](uint16_t port, int report) {
    ddp::ElasticGroup group(envFor(0, 2, port, board), options);
    group.comm().barrier();
    void* mem = ::mmap(nullptr, 2 * kHalf, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS,
                       -1, 0);
    if (mem == MAP_FAILED) return 92;
    std::memset(mem, 1, kHalf);
    ::mprotect(static_cast<char*>(mem) + kHalf, kHalf, PROT_NONE);
    try {
      group.comm().send(mem, 2 * kHalf, 1);
    } catch (const ddp::Error&) {
    }
    RankProcess::say(report, "sent half");
    ::pause();  // until the test kills it
    return 0;
  });
  // The survivor: reports when the first bytes arrived, then what became of the receive.
  RankProcess survivor([&](uint16_t port, int report) {
    ddp::ElasticGroup group(envFor(1, 2, port, board), options);
    group.comm().barrier();
    std::vector<char> into(2 * kHalf, 0);
    std::thread watch([&] {
      while (__atomic_load_n(&into[0], __ATOMIC_ACQUIRE) == 0) std::this_thread::yield();
      RankProcess::say(report, "receiving");
    });
    try {
      group.comm().recv(into.data(), into.size(), 0);
      RankProcess::say(report, "received the whole message");
    } catch (const ddp::CommError& e) {
      RankProcess::say(report, std::string("receive failed: ") + e.what());
    }
    watch.join();
    group.rebuild(20s);
    float v = 2;
    group.comm().allreduce(&v, 1, ddp::DataType::kFloat32, ddp::ReduceOp::kSum);
    RankProcess::say(report, "quorum " + ddp::toString(group.view().id) + " sum " +
                                 std::to_string(int(v)) + " pid " + std::to_string(::getpid()));
    group.comm().barrier();
    return 0;
  });
  // The donor's replacement: joins the newest quorum the test published.
  RankProcess replacement([&](uint16_t port, int report) {
    auto env = envFor(0, 2, port, board);
    env.stateFromPeer = true;
    ddp::ElasticGroup group(env, options);
    float v = 5;
    group.comm().allreduce(&v, 1, ddp::DataType::kFloat32, ddp::ReduceOp::kSum);
    RankProcess::say(report, "quorum " + ddp::toString(group.view().id) + " sum " +
                                 std::to_string(int(v)));
    group.comm().barrier();
    return 0;
  });

  ddp::StoreServerThread server(ddp::test::loopbackStore());
  publishQuorum(board, 2, server.port(), 0);
  donor.start(server.port());
  survivor.start(server.port());
  REQUIRE(survivor.nextLine(30s) == "receiving");
  donor.kill();
  // Its agent publishes the next quorum, and a second failure the one after at once.
  publishQuorum(board, 2, server.port(), 1);
  publishQuorum(board, 2, server.port(), 2);
  replacement.start(server.port());

  const std::string failed = survivor.nextLine(30s);
  CHECK_THAT(failed, Catch::StartsWith("receive failed: ") &&
                         Catch::Contains("receive of 8388608 bytes from rank 0"));
  CHECK(survivor.nextLine(30s) ==
        "quorum 0.2 sum 7 pid " + std::to_string(survivor.pid()));
  CHECK(replacement.nextLine(30s) == "quorum 0.2 sum 7");
  const int status = survivor.exitStatus(30s);
  CHECK(WIFEXITED(status));
  CHECK(WEXITSTATUS(status) == 0);
  CHECK(replacement.exitStatus(30s) == 0);
}

// A build superseded while its connect to a peer is still in progress (the peer answers no SYN)
// used to end the rank's process 4 s after the newer quorum (before that, to hold it for the
// ~2 min of SYN retries). Now the connect is failed and the rank builds the newest quorum in its
// own process.
TEST_CASE("a rank whose build connects to a peer that answers nothing joins the newest quorum in "
          "its own process", "[elastic][multiproc]") {
  ddp::QuorumBoard board(2);
  auto options = ddp::test::glooOptions(20s);
  // Bound above the deaf peer's 127.0.0.1, rank 0 is the side of the pair that connects (Gloo's
  // pair: the higher address connects to the lower one's listener).
  options.bindAddress = "127.0.0.2";
  RankProcess rank0([&](uint16_t port, int report) {
    ddp::ElasticGroup group(envFor(0, 2, port, board), options);  // quorum 0 never forms
    float v = 3;
    group.comm().allreduce(&v, 1, ddp::DataType::kFloat32, ddp::ReduceOp::kSum);
    RankProcess::say(report, "quorum " + ddp::toString(group.view().id) + " sum " +
                                 std::to_string(int(v)) + " pid " + std::to_string(::getpid()));
    return 0;
  });
  DeafListener deaf;
  ddp::StoreServerThread server(ddp::test::loopbackStore());
  publishQuorum(board, 2, server.port(), 0);
  // Rank 1 of quorum 0 publishes its pair's address, as Gloo's connectFullMesh would, and never
  // accepts (ElasticGroup builds quorum q under "ddp/comm/q<q>"; Gloo adds "/gloo").
  auto store = ddp::connectWorkerStore(envFor(1, 2, server.port(), board), 10s);
  ddp::detail::GlooStoreAdapter adapter(*store, "ddp/comm/q0/gloo", 10s);
  const std::string host = "deaf";
  adapter.set("rank_1", std::vector<char>(host.begin(), host.end()));
  adapter.set("1", deaf.glooAddress());
  rank0.start(server.port());
  const auto deadline = std::chrono::steady_clock::now() + 30s;
  while (!connectPendingTo(deaf.port()) && std::chrono::steady_clock::now() < deadline) {
    std::this_thread::sleep_for(10ms);  // polls the kernel's table; no event says it changed
  }
  REQUIRE(connectPendingTo(deaf.port()));
  // Its agent publishes quorum 1 without rank 1: rank 0 alone.
  std::vector<std::pair<int, ddp::QuorumRecord>> alone{{0, ddp::test::recordFor(0, 1, server.port(), 1)}};
  board.publish(alone);

  CHECK(rank0.nextLine(30s) == "quorum 0.1 sum 3 pid " + std::to_string(rank0.pid()));
  const int status = rank0.exitStatus(30s);
  CHECK(WIFEXITED(status));
  CHECK(WEXITSTATUS(status) == 0);
}
