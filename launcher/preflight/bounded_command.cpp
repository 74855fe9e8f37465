#include "launcher/preflight/bounded_command.hpp"

#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <sys/prctl.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>

#include "rendezvous/base/fd_limit.hpp"

namespace ddp {
namespace {

using Clock = std::chrono::steady_clock;

// In the child, between fork and exec: async-signal-safe calls only.
[[noreturn]] void execChild(const std::vector<char*>& argv, int out) {
  ::prctl(PR_SET_PDEATHSIG, SIGKILL);
  const int null = ::open("/dev/null", O_RDWR);
  if (null >= 0) {
    ::dup2(null, 0);
    ::dup2(null, 2);
  }
  ::dup2(out, 1);
  restoreInheritedFdLimit();  // the agent's raised limit is not the command's
  ::execvp(argv[0], argv.data());
  ::_exit(127);
}

// Reads the child's stdout until it closes (true) or `deadline` passes (false).
bool readUntil(int fd, Clock::time_point deadline, std::string& out, size_t maxBytes) {
  char buf[1024];
  while (true) {
    const auto left = std::chrono::ceil<std::chrono::milliseconds>(deadline - Clock::now());
    if (left.count() <= 0) return false;
    pollfd p{fd, POLLIN, 0};
    const int rc = ::poll(&p, 1, static_cast<int>(left.count()));
    if (rc < 0 && errno == EINTR) continue;
    if (rc <= 0) return false;
    const ssize_t n = ::read(fd, buf, sizeof(buf));
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) return true;
    out.append(buf, std::min(static_cast<size_t>(n), maxBytes - std::min(maxBytes, out.size())));
  }
}

// Waits until `pid` exited or `deadline` passes (false), through a pidfd: no polling loop.
bool exitedBy(pid_t pid, Clock::time_point deadline) {
  const int fd = static_cast<int>(::syscall(SYS_pidfd_open, pid, 0));
  if (fd < 0) return true;  // no pidfd (Linux < 5.3): the blocking waitpid decides
  bool exited = false;
  while (true) {
    const auto left = std::chrono::ceil<std::chrono::milliseconds>(deadline - Clock::now());
    pollfd p{fd, POLLIN, 0};
    const int rc = ::poll(&p, 1, static_cast<int>(std::max<int64_t>(left.count(), 0)));
    if (rc < 0 && errno == EINTR) continue;
    exited = rc > 0;
    break;
  }
  ::close(fd);
  return exited;
}

}  // namespace

std::optional<std::string> runBounded(const std::vector<std::string>& argv,
                                      std::chrono::milliseconds timeout, size_t maxBytes) {
  if (argv.empty()) return std::nullopt;
  std::vector<char*> cargv;
  for (const auto& a : argv) cargv.push_back(const_cast<char*>(a.c_str()));
  cargv.push_back(nullptr);
  int fds[2];
  if (::pipe2(fds, O_CLOEXEC) != 0) return std::nullopt;
  const auto deadline = Clock::now() + timeout;
  const pid_t pid = ::fork();
  if (pid == 0) execChild(cargv, fds[1]);
  ::close(fds[1]);
  if (pid < 0) {
    ::close(fds[0]);
    return std::nullopt;
  }
  std::string out;
  const bool finished = readUntil(fds[0], deadline, out, maxBytes) && exitedBy(pid, deadline);
  ::close(fds[0]);
  if (!finished) ::kill(pid, SIGKILL);
  int status = 0;
  pid_t reaped = -1;
  do {
    reaped = ::waitpid(pid, &status, 0);
  } while (reaped < 0 && errno == EINTR);
  // reaped < 0: someone else reaped it (the worker group's stray sweep): no trustworthy status.
  if (!finished || reaped != pid || !WIFEXITED(status) || WEXITSTATUS(status) != 0) {
    return std::nullopt;
  }
  return out;
}

}  // namespace ddp
