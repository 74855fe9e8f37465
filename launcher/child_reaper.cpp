#include "launcher/child_reaper.hpp"

#include <signal.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <unistd.h>

#include <boost/asio/post.hpp>
#include <cerrno>
#include <utility>
#include <vector>

#include "launcher/process_tree.hpp"

namespace ddp {

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
  // The child may have exited before it was registered; its SIGCHLD may already be consumed.
  boost::asio::post(io_, [this] { reapReady(); });
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
  std::vector<std::pair<pid_t, int>> exited;
  for (const auto& entry : handlers_) {
    int status = 0;
    pid_t r;
    do {
      r = ::waitpid(entry.first, &status, WNOHANG);
    } while (r < 0 && errno == EINTR);
    if (r == entry.first) exited.emplace_back(entry.first, status);
    if (r < 0 && errno == ECHILD) exited.emplace_back(entry.first, 0xff00);  // reaped elsewhere
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
