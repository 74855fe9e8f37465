#include "launcher/workers/child_reaper.hpp"

#include <signal.h>
#include <sys/prctl.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include <boost/asio/post.hpp>
#include <cerrno>
#include <optional>
#include <utility>
#include <vector>

#include "launcher/workers/process_tree.hpp"

namespace ddp {
namespace {

int openPidfd(pid_t pid) {
#ifdef SYS_pidfd_open
  return static_cast<int>(::syscall(SYS_pidfd_open, pid, 0));
#else
  (void)pid;
  errno = ENOSYS;
  return -1;
#endif
}

// waitpid(pid, WNOHANG): the status when `pid` was reaped now (a child reaped elsewhere counts,
// with status 0xff00), nullopt while it runs.
std::optional<int> tryReap(pid_t pid) {
  int status = 0;
  pid_t r;
  do {
    r = ::waitpid(pid, &status, WNOHANG);
  } while (r < 0 && errno == EINTR);
  if (r == pid) return status;
  if (r < 0 && errno == ECHILD) return 0xff00;
  return std::nullopt;
}

}  // namespace

ChildReaper::ChildReaper(boost::asio::io_context& io) : io_(io), sigchld_(io, SIGCHLD) {
  ::prctl(PR_SET_CHILD_SUBREAPER, 1);
  arm();
}

ChildReaper::~ChildReaper() {
  boost::system::error_code ignored;
  sigchld_.cancel(ignored);
}

void ChildReaper::arm() {
  sigchld_.async_wait([this](const boost::system::error_code& ec, int) {
    if (ec) return;  // cancelled: the reaper is going away
    reapReady();
    arm();
  });
}

void ChildReaper::watch(pid_t pid, ExitHandler onExit) {
  handlers_[pid] = std::move(onExit);
  const int fd = openPidfd(pid);
  if (fd >= 0) {
    // Ready at once when the child has already exited.
    pidfds_[pid] = std::make_unique<boost::asio::posix::stream_descriptor>(io_, fd);
    awaitPidfd(pid);
    return;
  }
  // The child may have exited before it was registered; its SIGCHLD may already be consumed.
  boost::asio::post(io_, [this] { reapReady(); });
}

void ChildReaper::forget(pid_t pid) {
  handlers_.erase(pid);
  pidfds_.erase(pid);  // closing it cancels its wait
}

void ChildReaper::awaitPidfd(pid_t pid) {
  pidfds_.at(pid)->async_wait(boost::asio::posix::stream_descriptor::wait_read,
                              [this, pid](const boost::system::error_code& ec) {
                                if (ec || !pidfds_.count(pid)) return;
                                if (!reapOne(pid)) awaitPidfd(pid);
                              });
}

bool ChildReaper::reapOne(pid_t pid) {
  auto it = handlers_.find(pid);
  if (it == handlers_.end()) return true;
  const auto status = tryReap(pid);
  if (!status) return false;
  ExitHandler handler = std::move(it->second);
  handlers_.erase(it);
  pidfds_.erase(pid);
  handler(pid, *status);
  return true;
}

void ChildReaper::sweepStrays() {
  // Layer by layer: the children of each reaped stray are ours by the time waitpid returns.
  for (;;) {
    std::vector<pid_t> children;
    forEachChild(
        ::getpid(),
        [](pid_t child, void* out) { static_cast<std::vector<pid_t>*>(out)->push_back(child); },
        &children);
    std::vector<pid_t> strays;
    for (pid_t pid : children) {
      if (handlers_.count(pid) == 0) strays.push_back(pid);
    }
    if (strays.empty()) return;
    for (pid_t pid : strays) ::kill(pid, SIGKILL);
    for (pid_t pid : strays) {
      while (::waitpid(pid, nullptr, 0) < 0 && errno == EINTR) {
      }
    }
  }
}

void ChildReaper::reapReady() {
  // Children with a pidfd are reaped when it becomes ready, one by one in exit order.
  std::vector<std::pair<pid_t, int>> exited;
  for (const auto& entry : handlers_) {
    if (pidfds_.count(entry.first)) continue;
    if (auto status = tryReap(entry.first)) exited.emplace_back(entry.first, *status);
  }
  for (const auto& [pid, status] : exited) {
    auto it = handlers_.find(pid);
    if (it == handlers_.end()) continue;
    ExitHandler handler = std::move(it->second);
    handlers_.erase(it);
    handler(pid, status);
  }
}

}  // namespace ddp
