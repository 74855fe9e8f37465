// The descriptor limit of a serving process (fd_limit.hpp): raised to the hard limit, reported,
// and put back for the programs it starts. Limits are changed in a forked child only, so the test
// process keeps its own.
#include <catch2/catch.hpp>

#include <sys/resource.h>
#include <sys/wait.h>
#include <unistd.h>

#include <functional>

#include "rendezvous/base/fd_limit.hpp"

using namespace ddp;

namespace {

// Runs `body` in a forked child with the soft limit set to `soft`; the child's exit code: 0 when
// every expectation of `body` held, else the number of the first that failed.
int inChild(rlim_t soft, const std::function<int()>& body) {
  const pid_t pid = ::fork();
  REQUIRE(pid >= 0);
  if (pid == 0) {
    rlimit r{};
    ::getrlimit(RLIMIT_NOFILE, &r);
    r.rlim_cur = soft;
    if (::setrlimit(RLIMIT_NOFILE, &r) != 0) ::_exit(99);
    ::_exit(body());
  }
  int status = 0;
  ::waitpid(pid, &status, 0);
  REQUIRE(WIFEXITED(status));
  return WEXITSTATUS(status);
}

}  // namespace

TEST_CASE("raiseFdLimit lifts the soft limit to the hard one; restore puts it back", "[unit]") {
  rlimit mine{};
  ::getrlimit(RLIMIT_NOFILE, &mine);
  if (mine.rlim_max == RLIM_INFINITY || mine.rlim_max <= 64) {
    WARN("skipped: the hard limit must be finite and above 64");
    return;
  }
  const uint64_t hard = mine.rlim_max;
  CHECK(inChild(64, [hard] {
          const FdLimit before = currentFdLimit();
          if (before.soft != 64 || before.before != 64 || before.raised()) return 1;
          const FdLimit raised = raiseFdLimit();
          if (raised.before != 64 || raised.soft != hard || !raised.raised()) return 2;
          if (raised.describe() != std::to_string(hard) + " (raised from 64 to the hard limit)")
            return 3;
          if (raiseFdLimit().before != 64) return 4;  // idempotent: still what it started with
          restoreInheritedFdLimit();
          rlimit now{};
          ::getrlimit(RLIMIT_NOFILE, &now);
          if (now.rlim_cur != 64 || now.rlim_max != hard) return 5;
          return 0;
        }) == 0);
}

TEST_CASE("at the hard limit already, nothing changes and describe says so", "[unit]") {
  rlimit mine{};
  ::getrlimit(RLIMIT_NOFILE, &mine);
  if (mine.rlim_max == RLIM_INFINITY) return;
  CHECK(inChild(mine.rlim_max, [] {
          const FdLimit l = raiseFdLimit();
          if (l.raised() || l.soft != l.hard) return 1;
          return l.describe() == std::to_string(l.soft) + " (the hard limit)" ? 0 : 2;
        }) == 0);
}

TEST_CASE("connections get the limit less a reserve of limit/16, 16 to 256", "[unit]") {
  CHECK(fdReserve(64) == 16);
  CHECK(connectionRoom(64) == 48);
  CHECK(connectionRoom(1024) == 960);
  CHECK(connectionRoom(4096) == 3840);
  CHECK(connectionRoom(1 << 20) == (1u << 20) - 256);
  CHECK(connectionRoom(10) == 1);
  CHECK(openFdCount() >= 3);
}
