#include "launcher/workers/terminal.hpp"

#include <fcntl.h>
#include <pty.h>
#include <signal.h>
#include <sys/ioctl.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <string>
#include <vector>

#include "launcher/workers/process_tree.hpp"
#include "rendezvous/base/error.hpp"

namespace ddp {
namespace {

void setCloseOnExec(int fd) { ::fcntl(fd, F_SETFD, ::fcntl(fd, F_GETFD) | FD_CLOEXEC); }

bool makePty(StreamEnds& ends, unsigned short columns, unsigned short rows) {
  int master = -1, slave = -1;
  struct winsize size {};
  size.ws_col = columns;
  size.ws_row = rows;
  if (::openpty(&master, &slave, nullptr, nullptr, &size) != 0) return false;
  struct termios raw {};
  if (::tcgetattr(slave, &raw) == 0) {
    ::cfmakeraw(&raw);  // no output processing: "\n" stays "\n", binary passes unchanged
    ::tcsetattr(slave, TCSANOW, &raw);
  }
  setCloseOnExec(master);
  setCloseOnExec(slave);
  ends.read = master;
  ends.write = slave;
  return true;
}

void collectChild(pid_t child, void* ctx) { static_cast<std::vector<pid_t>*>(ctx)->push_back(child); }

}  // namespace

TerminalPlan detectTerminal(int consoleOut, int consoleErr) {
  TerminalPlan plan;
  if (::isatty(STDIN_FILENO) == 1 && ::tcgetpgrp(STDIN_FILENO) == ::getpgrp()) {
    plan.foregroundGroup = ::getpgrp();
  }
  plan.stdoutPty = ::isatty(consoleOut) == 1;
  plan.stderrPty = ::isatty(consoleErr) == 1;
  struct winsize size {};
  const int sized = plan.stdoutPty ? consoleOut : plan.stderrPty ? consoleErr : -1;
  if (sized >= 0 && ::ioctl(sized, TIOCGWINSZ, &size) == 0) {
    plan.columns = size.ws_col;
    plan.rows = size.ws_row;
  }
  return plan;
}

StreamEnds makeStreamEnds(bool pty, unsigned short columns, unsigned short rows) {
  StreamEnds ends;
  if (pty && makePty(ends, columns, rows)) return ends;
  int fds[2];
  if (::pipe2(fds, O_CLOEXEC) != 0) {
    throw Error(std::string("cannot create a pipe for a worker: ") + std::strerror(errno));
  }
  ends.read = fds[0];
  ends.write = fds[1];
  return ends;
}

void signalWorker(pid_t worker, int signal) {
  if (worker <= 0) return;
  if (::getpgid(worker) == worker) {
    ::killpg(worker, signal);
    return;
  }
  // Parents before children, as killpg reaches them at once; a process that forks meanwhile may
  // leave its newest child unsignalled, which its guardian kills when the worker exits.
  std::vector<pid_t> tree = {worker};
  for (std::size_t i = 0; i < tree.size() && tree.size() < 4096; ++i) {
    forEachChild(tree[i], collectChild, &tree);
  }
  for (pid_t pid : tree) ::kill(pid, signal);
}

TerminalModes::TerminalModes() {
  struct termios modes {};
  if (::isatty(STDIN_FILENO) == 1 && ::tcgetattr(STDIN_FILENO, &modes) == 0) saved_ = modes;
}

void TerminalModes::restore() const {
  if (!saved_) return;
  // SIGTTOU would stop a background ddprun that touches the terminal's modes: hold it meanwhile.
  sigset_t ttou, old;
  sigemptyset(&ttou);
  sigaddset(&ttou, SIGTTOU);
  ::pthread_sigmask(SIG_BLOCK, &ttou, &old);
  ::tcsetattr(STDIN_FILENO, TCSADRAIN, &*saved_);
  ::pthread_sigmask(SIG_SETMASK, &old, nullptr);
}

}  // namespace ddp
