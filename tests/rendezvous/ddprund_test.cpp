// The ddprund binary: start on port 0 with --port-file, serve raw TCPStore requests, stop on
// SIGTERM/SIGINT with exit 0; bad flags exit 2; a taken port exits 1 with a clear line.
#include <catch2/catch.hpp>

#include <fcntl.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <optional>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "raw_socket.hpp"

namespace {

using namespace std::chrono_literals;

std::string envOr(const char* name, const std::string& fallback) {
  const char* v = std::getenv(name);
  return v != nullptr && *v != '\0' ? v : fallback;
}

std::string readFile(const std::string& path) {
  std::ifstream in(path);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

// A ddprund child process with stdout/stderr in files; killed (SIGKILL) and reaped on destruction.
class Daemon {
 public:
  explicit Daemon(const std::vector<std::string>& args, const std::string& tag) {
    const std::string dir = envOr("DDP_TEST_TMP", "/tmp");
    out_ = dir + "/ddprund-" + tag + ".out";
    err_ = dir + "/ddprund-" + tag + ".err";
    std::vector<std::string> argv{envOr("DDP_BIN_DIR", "build/bin") + "/ddprund"};
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
      ::execv(raw[0], raw.data());
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
uint16_t waitForPortFile(const std::string& path, Daemon& daemon) {
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

std::string portFilePath(const std::string& tag) {
  const std::string path = envOr("DDP_TEST_TMP", "/tmp") + "/ddprund-" + tag + ".port";
  std::remove(path.c_str());
  return path;
}

// v1a SET "/k" = "v", then GET "/k": returns the GET reply's value.
std::string setThenGet(uint16_t port) {
  ddp::test::RawSocket s(port);
  const std::string key("\x02\0\0\0\0\0\0\0/k", 10);
  const std::string value("\x01\0\0\0\0\0\0\0v", 9);
  s.send(std::string(1, '\x00') + key + value + std::string(1, '\x02') + key);
  const std::string len = s.recv(8);
  CHECK(len == std::string("\x01\0\0\0\0\0\0\0", 8));
  return s.recv(1);
}

}  // namespace

TEST_CASE("ddprund serves on --port 0, writes --port-file and stops on SIGTERM", "[ddprund]") {
  const auto portFile = portFilePath("term");
  Daemon d({"--port", "0", "--port-file", portFile, "--host", "127.0.0.1"}, "term");
  const uint16_t port = waitForPortFile(portFile, d);
  CHECK(port > 0);
  CHECK(setThenGet(port) == "v");
  CHECK_THAT(d.out(), Catch::Contains("listening on 127.0.0.1:" + std::to_string(port)));
  d.signal(SIGTERM);
  CHECK(d.exitCode(20s) == 0);
}

TEST_CASE("ddprund on the default dual-stack host stops on SIGINT", "[ddprund]") {
  const auto portFile = portFilePath("int");
  Daemon d({"--port=0", "--port-file=" + portFile, "--log-level=debug"}, "int");
  const uint16_t port = waitForPortFile(portFile, d);
  CHECK(setThenGet(port) == "v");
  CHECK_THAT(d.out(), Catch::Contains("listening on [::]:" + std::to_string(port)));
  d.signal(SIGINT);
  CHECK(d.exitCode(20s) == 0);
  CHECK_THAT(d.err(), Catch::Contains("speaks v1"));  // the debug log names the dialect
}

TEST_CASE("ddprund rejects bad flags with exit 2 and one line", "[ddprund]") {
  for (const auto& bad : std::vector<std::vector<std::string>>{
           {"--bogus"}, {"--port", "70000"}, {"--legacy-dialect", "3.0"}, {"--log-level", "loud"}}) {
    Daemon d(bad, "badflag");
    CHECK(d.exitCode(20s) == 2);
    const std::string err = d.err();
    CHECK_THAT(err, Catch::StartsWith("ddprund: "));
    CHECK(std::count(err.begin(), err.end(), '\n') == 1);
  }
  Daemon version({"--version"}, "version");
  CHECK(version.exitCode(20s) == 0);
  CHECK_THAT(version.out(), Catch::StartsWith("ddprund "));
}

TEST_CASE("ddprund on a taken port exits 1 naming the address", "[ddprund]") {
  const auto portFile = portFilePath("first");
  Daemon first({"--port", "0", "--port-file", portFile}, "first");
  const uint16_t port = waitForPortFile(portFile, first);
  Daemon second({"--port", std::to_string(port), "--host", "127.0.0.1"}, "second");
  CHECK(second.exitCode(20s) == 1);
  CHECK_THAT(second.err(), Catch::Contains("127.0.0.1:" + std::to_string(port)) &&
                               Catch::Contains("in use"));
  CHECK(setThenGet(port) == "v");  // the first one is unaffected
  first.signal(SIGTERM);
  CHECK(first.exitCode(20s) == 0);
}
