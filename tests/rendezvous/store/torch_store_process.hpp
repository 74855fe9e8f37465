// TorchStoreProcess: torch 1.13's own TCPStore server (the legacy single-threaded one) in a child
// /usr/bin/python3, for tests that talk to the real thing.
//
// The child binds port 0 and prints the port; it exits when its stdin closes, and the destructor
// also SIGKILLs it by pid and reaps it, so no server outlives a failed test.
//
// Thread safety: construct and destroy on one thread; port() is safe from any thread.
#pragma once

#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstdint>
#include <stdexcept>
#include <string>

extern char** environ;

namespace ddp::test {

class TorchStoreProcess {
 public:
  // Starts the server; throws std::runtime_error when it does not report a port in `budget`.
  explicit TorchStoreProcess(std::chrono::seconds budget = std::chrono::seconds(90)) {
    static const char* kScript =
        "import datetime, sys\n"
        "import torch.distributed as dist\n"
        "s = dist.TCPStore('127.0.0.1', 0, None, True, datetime.timedelta(seconds=600),"
        " wait_for_workers=False)\n"
        "print(s.port, flush=True)\n"
        "sys.stdin.read()\n";
    int in[2], out[2];
    if (::pipe2(in, O_CLOEXEC) != 0 || ::pipe2(out, O_CLOEXEC) != 0) {
      throw std::runtime_error("pipe failed");
    }
    posix_spawn_file_actions_t actions;
    posix_spawn_file_actions_init(&actions);
    posix_spawn_file_actions_adddup2(&actions, in[0], 0);
    posix_spawn_file_actions_adddup2(&actions, out[1], 1);
    const char* argv[] = {"/usr/bin/python3", "-u", "-c", kScript, nullptr};
    const int rc = ::posix_spawn(&pid_, argv[0], &actions, nullptr, const_cast<char**>(argv),
                                 environ);
    posix_spawn_file_actions_destroy(&actions);
    ::close(in[0]);
    ::close(out[1]);
    stdin_ = in[1];
    stdout_ = out[0];
    if (rc != 0) {
      pid_ = -1;
      throw std::runtime_error("cannot start /usr/bin/python3");
    }
    port_ = readPort(budget);
  }

  ~TorchStoreProcess() {
    if (stdin_ >= 0) ::close(stdin_);
    if (stdout_ >= 0) ::close(stdout_);
    if (pid_ > 0) {
      ::kill(pid_, SIGKILL);
      int status = 0;
      ::waitpid(pid_, &status, 0);
    }
  }

  TorchStoreProcess(const TorchStoreProcess&) = delete;
  TorchStoreProcess& operator=(const TorchStoreProcess&) = delete;

  uint16_t port() const { return port_; }

 private:
  uint16_t readPort(std::chrono::seconds budget) {
    const auto deadline = std::chrono::steady_clock::now() + budget;
    std::string line;
    while (line.find('\n') == std::string::npos) {
      const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(
          deadline - std::chrono::steady_clock::now());
      pollfd fd{stdout_, POLLIN, 0};
      if (left.count() <= 0 || ::poll(&fd, 1, static_cast<int>(left.count())) <= 0) {
        throw std::runtime_error("torch's TCPStore server printed no port within budget");
      }
      char buffer[64];
      const ssize_t n = ::read(stdout_, buffer, sizeof(buffer));
      if (n <= 0) throw std::runtime_error("torch's TCPStore server exited before its port");
      line.append(buffer, static_cast<std::size_t>(n));
    }
    return static_cast<uint16_t>(std::stoi(line));
  }

  pid_t pid_ = -1;
  int stdin_ = -1;
  int stdout_ = -1;
  uint16_t port_ = 0;
};

}  // namespace ddp::test
