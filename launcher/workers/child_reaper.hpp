// ChildReaper: turns child-process exits into io_context events, in the order the children exited.
//
// Each watched child gets a pidfd (pidfd_open, Linux >= 5.3) waited on by the io_context: the
// kernel signals a pidfd when its process exits, and epoll hands ready pidfds back in the order
// they became ready, so exits that happen while the loop is busy are still reported in exit order.
// (A SIGCHLD sweep would see them together and report them in pid order.) Where pidfd_open is not
// available, one asio signal_set on SIGCHLD sweeps with waitpid(pid, WNOHANG) over the children it
// watches without a pidfd (never waitpid(-1): other code in the process may own children).
// No polling: with no exit nothing runs.
//
// It also makes the process a child subreaper (PR_SET_CHILD_SUBREAPER): a process orphaned below
// it (the worker of a guardian that was killed, and what that worker started) becomes its child
// instead of init's, and sweepStrays() kills and reaps such strays. The launcher starts no
// children other than the ones it watches, so every unwatched child is a stray.
//
// Thread safety: use from the io_context's thread only. The io_context must outlive it.
#pragma once

#include <sys/types.h>

#include <boost/asio/io_context.hpp>
#include <boost/asio/posix/stream_descriptor.hpp>
#include <boost/asio/signal_set.hpp>
#include <functional>
#include <map>
#include <memory>

namespace ddp {

class ChildReaper {
 public:
  // Called once with the raw wait status (use WIFEXITED & co).
  using ExitHandler = std::function<void(pid_t pid, int status)>;

  explicit ChildReaper(boost::asio::io_context& io);
  ~ChildReaper();
  ChildReaper(const ChildReaper&) = delete;
  ChildReaper& operator=(const ChildReaper&) = delete;

  // Watches `pid` (a child of this process); `onExit` runs on the io_context after it was reaped.
  // A child that already exited is reported too. Non-blocking.
  void watch(pid_t pid, ExitHandler onExit);

  // Stops watching `pid` without reaping it (its owner reaps it itself). Non-blocking.
  void forget(pid_t pid);

  // SIGKILLs every child of this process that is not watched and reaps it, then the children
  // those left (ours now), until no unwatched child is left. Blocks until they are reaped
  // (milliseconds: they are SIGKILLed; longer only for a process in uninterruptible sleep).
  void sweepStrays();

  // Number of children watched and not yet reaped.
  std::size_t pending() const { return handlers_.size(); }

 private:
  void arm();
  void reapReady();
  void awaitPidfd(pid_t pid);
  // waitpid(pid, WNOHANG); runs the handler when it was reaped. True when it was.
  bool reapOne(pid_t pid);

  boost::asio::io_context& io_;
  boost::asio::signal_set sigchld_;
  std::map<pid_t, ExitHandler> handlers_;
  std::map<pid_t, std::unique_ptr<boost::asio::posix::stream_descriptor>> pidfds_;
};

}  // namespace ddp
