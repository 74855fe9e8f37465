// ChildReaper: exits become io_context events in the order the children exited, also when they
// all happen while the loop is busy (where a SIGCHLD sweep would report them in pid order).
#include "launcher/workers/child_reaper.hpp"

#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <boost/asio/post.hpp>
#include <catch2/catch.hpp>
#include <cerrno>
#include <vector>

namespace ddp {
namespace {

pid_t sleeper() {
  const pid_t pid = ::fork();
  if (pid == 0) {
    ::pause();
    ::_exit(0);
  }
  return pid;
}

// Kills `pid` and blocks until it is a zombie (not reaped).
void killAndAwaitZombie(pid_t pid, int signal) {
  ::kill(pid, signal);
  siginfo_t info{};
  while (::waitid(P_PID, static_cast<id_t>(pid), &info, WEXITED | WNOWAIT) < 0 && errno == EINTR) {
  }
}

}  // namespace

TEST_CASE("exits are reported in exit order, not pid order", "[reaper]") {
  for (int round = 0; round < 20; ++round) {
    boost::asio::io_context io;
    ChildReaper reaper(io);
    const pid_t a = sleeper(), b = sleeper();
    // The child with the higher pid exits first.
    const pid_t first = std::max(a, b), second = std::min(a, b);
    std::vector<pid_t> order;
    std::vector<int> signals;
    for (pid_t pid : {a, b}) {
      reaper.watch(pid, [&](pid_t p, int status) {
        order.push_back(p);
        signals.push_back(WIFSIGNALED(status) ? WTERMSIG(status) : 0);
      });
    }
    // Both exit while the loop is busy in this handler.
    boost::asio::post(io, [&] {
      killAndAwaitZombie(first, SIGTERM);
      killAndAwaitZombie(second, SIGKILL);
    });
    while (reaper.pending() > 0) io.run_one();
    INFO("round " << round);
    REQUIRE(order == std::vector<pid_t>{first, second});
    CHECK(signals == std::vector<int>{SIGTERM, SIGKILL});
  }
}

TEST_CASE("a child that exited before it was watched is reported; a forgotten one is not",
          "[reaper]") {
  boost::asio::io_context io;
  ChildReaper reaper(io);
  const pid_t early = sleeper();
  killAndAwaitZombie(early, SIGKILL);
  int reported = 0;
  reaper.watch(early, [&](pid_t, int status) {
    CHECK(WTERMSIG(status) == SIGKILL);
    ++reported;
  });
  const pid_t forgotten = sleeper();
  reaper.watch(forgotten, [&](pid_t, int) { FAIL("a forgotten child was reported"); });
  reaper.forget(forgotten);
  while (reaper.pending() > 0) io.run_one();
  CHECK(reported == 1);
  ::kill(forgotten, SIGKILL);
  CHECK(::waitpid(forgotten, nullptr, 0) == forgotten);  // still ours to reap
  io.poll();
}

}  // namespace ddp
