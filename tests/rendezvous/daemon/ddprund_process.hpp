// Daemon: a ddprund child process for tests, with stdout/stderr in files under $DDP_TEST_TMP;
// killed (SIGKILL) and reaped on destruction. Plus the port-file helpers.
//
// Thread safety: none; one test thread.
#pragma once

#include <catch2/catch.hpp>

#include <fcntl.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <optional>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

namespace ddp::test {

using namespace std::chrono_literals;

inline std::string envOr(const char* name, const std::string& fallback) {
  const char* v = std::getenv(name);
  return v != nullptr && *v != '\0' ? v : fallback;
}

inline std::string readFile(const std::string& path) {
  std::ifstream in(path);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

// A ddprund child process with stdout/stderr in files; killed (SIGKILL) and reaped on destruction.
class Daemon {
 public:
  // Runs ddprund with `args`; `prefix` (e.g. {"prlimit", "--as=N", "--"}) goes in front.
  explicit Daemon(const std::vector<std::string>& args, const std::string& tag,
                  const std::vector<std::string>& prefix = {}) {
    const std::string dir = envOr("DDP_TEST_TMP", "/tmp");
    out_ = dir + "/ddprund-" + tag + ".out";
    err_ = dir + "/ddprund-" + tag + ".err";
    std::vector<std::string> argv = prefix;
    argv.push_back(envOr("DDP_BIN_DIR", "build/bin") + "/ddprund");
    argv.insert(argv.end(), args.begin(), args.end());
    pid_ = ::fork();
    REQUIRE(pid_ >= 0);
    if (pid_ == 0) {
      const int o = ::open(out_.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
      const int e = ::open(err_.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
      ::dup2(o, 1);
      ::dup2(e, 2);
      std::vector<char*> raw;
      for (auto& a : argv) raw.push_back(a.data());
      raw.push_back(nullptr);
      ::execvp(raw[0], raw.data());
      ::_exit(127);
    }
  }
  ~Daemon() {
    if (pid_ > 0 && !status_) {
      ::kill(pid_, SIGKILL);
      int status = 0;
      ::waitpid(pid_, &status, 0);
    }
  }

  void signal(int sig) { ::kill(pid_, sig); }
  pid_t pid() const { return pid_; }

  // The exit code once the process has exited (polled until `timeout`), else nullopt.
  std::optional<int> exitCode(std::chrono::milliseconds timeout) {
    const auto deadline = std::chrono::steady_clock::now() + timeout;
    while (!status_) {
      int status = 0;
      const pid_t r = ::waitpid(pid_, &status, WNOHANG);
      if (r == pid_) {
        status_ = WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
        break;
      }
      if (std::chrono::steady_clock::now() > deadline) return std::nullopt;
      std::this_thread::sleep_for(10ms);
    }
    return status_;
  }

  std::string out() const { return readFile(out_); }
  std::string err() const { return readFile(err_); }

 private:
  pid_t pid_ = -1;
  std::optional<int> status_;
  std::string out_, err_;
};

// Polls for the port file ddprund writes once listening.
inline uint16_t waitForPortFile(const std::string& path, Daemon& daemon) {
  const auto deadline = std::chrono::steady_clock::now() + 30s;
  while (std::chrono::steady_clock::now() < deadline) {
    const std::string text = readFile(path);
    if (!text.empty() && text.back() == '\n') return static_cast<uint16_t>(std::stoi(text));
    if (daemon.exitCode(0ms)) FAIL("ddprund exited early: " << daemon.err());
    std::this_thread::sleep_for(10ms);
  }
  FAIL("no port file " << path << " after 30 s: " << daemon.err());
  return 0;
}

inline std::string portFilePath(const std::string& tag) {
  const std::string path = envOr("DDP_TEST_TMP", "/tmp") + "/ddprund-" + tag + ".port";
  std::remove(path.c_str());
  return path;
}

}  // namespace ddp::test
