// Helpers for the tests of process trees and signals around ddprun: a launcher that starts a
// command the way a shell would (own process group or not, signals ignored as under nohup), a
// /proc scan for children, and cleanup by an environment marker (never by name).
#pragma once

#include <fcntl.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <filesystem>
#include <fstream>
#include <map>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include "launcher_test_util.hpp"

namespace ddp::test {

struct LaunchOptions {
  std::vector<std::string> argv;  // argv[0] is run as given (a path)
  std::map<std::string, std::string> env;
  bool ownGroup = true;     // setpgid(0, 0), as a shell with job control starts a command
  std::vector<int> ignore;  // signals set to SIG_IGN before exec (nohup, a background job)
  std::string outFile;      // stdout and stderr
  std::string errFile;
};

// A command in a child process; SIGKILLed and reaped on destruction unless it was waited for.
class Launched {
 public:
  explicit Launched(LaunchOptions o) {
    pid_ = ::fork();
    if (pid_ != 0) return;
    if (o.ownGroup) ::setpgid(0, 0);
    for (int sig : {SIGINT, SIGQUIT, SIGHUP, SIGTERM, SIGUSR1, SIGUSR2}) ::signal(sig, SIG_DFL);
    for (int sig : o.ignore) ::signal(sig, SIG_IGN);
    const int out = ::open(o.outFile.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
    const int err = ::open(o.errFile.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
    ::dup2(out, 1);
    ::dup2(err, 2);
    for (const auto& [k, v] : o.env) ::setenv(k.c_str(), v.c_str(), 1);
    std::vector<char*> argv;
    for (auto& a : o.argv) argv.push_back(a.data());
    argv.push_back(nullptr);
    ::execv(argv[0], argv.data());
    ::_exit(126);
  }
  ~Launched() {
    if (code_) return;
    ::kill(pid_, SIGKILL);
    ::waitpid(pid_, nullptr, 0);
  }
  Launched(const Launched&) = delete;
  Launched& operator=(const Launched&) = delete;

  // Exit code (128 + signal if killed); -1 when it still runs after `budget`.
  int wait(std::chrono::milliseconds budget = std::chrono::seconds(60)) {
    const auto deadline = std::chrono::steady_clock::now() + budget;
    while (!code_ && std::chrono::steady_clock::now() < deadline) {
      int status = 0;
      if (::waitpid(pid_, &status, WNOHANG) == pid_) {
        code_ = WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
      } else {
        std::this_thread::sleep_for(std::chrono::milliseconds(5));
      }
    }
    return code_.value_or(-1);
  }
  pid_t pid() const { return pid_; }

 private:
  pid_t pid_ = -1;
  std::optional<int> code_;
};

// Fields of /proc/<pid>/stat after the command name: state and parent (nullopt when gone).
struct ProcStat {
  char state = '?';
  pid_t ppid = 0;
};
inline std::optional<ProcStat> procStat(pid_t pid) {
  std::ifstream in("/proc/" + std::to_string(pid) + "/stat");
  std::string all;
  if (!std::getline(in, all)) return std::nullopt;
  const auto close = all.rfind(')');
  if (close == std::string::npos || close + 4 >= all.size()) return std::nullopt;
  ProcStat s;
  s.state = all[close + 2];
  s.ppid = std::stoi(all.substr(close + 4));
  return s;
}

inline std::vector<pid_t> childrenOf(pid_t parent) {
  std::vector<pid_t> out;
  for (const auto& entry : std::filesystem::directory_iterator("/proc")) {
    const std::string name = entry.path().filename();
    if (name.find_first_not_of("0123456789") != std::string::npos) continue;
    const pid_t pid = std::stoi(name);
    if (auto s = procStat(pid); s && s->ppid == parent) out.push_back(pid);
  }
  return out;
}

// Every process whose environment holds exactly `entry` (KEY=VALUE).
inline std::vector<pid_t> markedProcesses(const std::string& entry) {
  std::vector<pid_t> out;
  for (const auto& dir : std::filesystem::directory_iterator("/proc")) {
    const std::string name = dir.path().filename();
    if (name.find_first_not_of("0123456789") != std::string::npos) continue;
    std::ifstream env(dir.path() / "environ");
    std::string var;
    while (std::getline(env, var, '\0')) {
      if (var == entry) {
        out.push_back(std::stoi(name));
        break;
      }
    }
  }
  return out;
}

// SIGKILLs whatever still carries the marker when the test ends (what a failing test leaked).
class MarkedCleanup {
 public:
  explicit MarkedCleanup(std::string entry) : entry_(std::move(entry)) {}
  ~MarkedCleanup() {
    for (pid_t pid : markedProcesses(entry_)) ::kill(pid, SIGKILL);
  }
  const std::string& entry() const { return entry_; }

 private:
  std::string entry_;
};

// Polls (5 ms steps) until `path` contains `text`; true when it does within `budget`.
inline bool waitForText(const std::string& path, const std::string& text,
                        std::chrono::milliseconds budget = std::chrono::seconds(30)) {
  const auto deadline = std::chrono::steady_clock::now() + budget;
  while (std::chrono::steady_clock::now() < deadline) {
    if (readFile(path).find(text) != std::string::npos) return true;
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
  }
  return false;
}

}  // namespace ddp::test
