// The worker timer FIFO on a real io_context: lines written the way torch's FileTimerClient writes
// them arrive in order; split, malformed and over-long lines; the FIFO's life.
#include "launcher/hang/file_timer_server.hpp"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <catch2/catch.hpp>
#include <chrono>
#include <filesystem>
#include <fstream>
#include <vector>

#include "launcher_test_util.hpp"

namespace ddp {
namespace {

using namespace std::chrono_literals;

// One client write, as FileTimerClient: open non-blocking, write, close. False when no reader.
bool clientWrite(const std::string& path, const std::string& bytes) {
  const int fd = ::open(path.c_str(), O_WRONLY | O_NONBLOCK | O_CLOEXEC);
  if (fd < 0) return false;
  const bool ok = ::write(fd, bytes.data(), bytes.size()) == static_cast<ssize_t>(bytes.size());
  ::close(fd);
  return ok;
}

std::string request(int pid, const std::string& scope, double expiration, int signal = 9) {
  return "{\"version\": 1, \"pid\": " + std::to_string(pid) + ", \"scope_id\": \"" + scope +
         "\", \"expiration_time\": " + std::to_string(expiration) +
         ", \"signal\": " + std::to_string(signal) + "}\n";
}

struct Served {
  boost::asio::io_context io;
  std::vector<FileTimerRequest> got;
  // Runs the loop until `n` requests arrived (bounded: a failure, not a hang, when they do not).
  bool await(std::size_t n) {
    const auto deadline = std::chrono::steady_clock::now() + 10s;
    while (got.size() < n && std::chrono::steady_clock::now() < deadline) io.run_for(20ms);
    return got.size() >= n;
  }
};

}  // namespace

TEST_CASE("requests written like torch's client reach the handler in order", "[file_timer]") {
  const std::string path = test::scratchDir("fts") + "/timer";
  Served s;
  FileTimerServer server(s.io, path);
  server.setHandler([&](const FileTimerRequest& r) { s.got.push_back(r); });
  REQUIRE(clientWrite(path, request(11, "a", 1700000000.5)));
  REQUIRE(clientWrite(path, request(12, "b", -1, 0)));
  REQUIRE(s.await(2));
  CHECK(s.got[0].pid == 11);
  CHECK(s.got[0].scopeId == "a");
  CHECK(s.got[1].pid == 12);
  CHECK(s.got[1].isRelease());
  CHECK(server.requests() == 2);
}

TEST_CASE("a line split across writes waits for its end", "[file_timer]") {
  const std::string path = test::scratchDir("fts") + "/timer";
  Served s;
  FileTimerServer server(s.io, path);
  server.setHandler([&](const FileTimerRequest& r) { s.got.push_back(r); });
  const std::string line = request(21, "split", 5);
  REQUIRE(clientWrite(path, line.substr(0, 20)));
  s.io.poll();  // reads the first half: nothing complete yet
  CHECK(s.got.empty());
  REQUIRE(clientWrite(path, line.substr(20)));
  REQUIRE(s.await(1));
  CHECK(s.got[0].scopeId == "split");
}

TEST_CASE("malformed and over-long lines are dropped; the next line is served", "[file_timer]") {
  const std::string path = test::scratchDir("fts") + "/timer";
  Served s;
  FileTimerServer server(s.io, path);
  server.setHandler([&](const FileTimerRequest& r) { s.got.push_back(r); });
  REQUIRE(clientWrite(path, "not json at all\n"));
  // Longer than PIPE_BUF, written in pieces (a real client could not write it atomically).
  const std::string longLine(kMaxTimerLine + 100, 'x');
  REQUIRE(clientWrite(path, longLine.substr(0, 3000)));
  REQUIRE(clientWrite(path, longLine.substr(3000) + "\n"));
  REQUIRE(clientWrite(path, request(31, "after", 5)));
  REQUIRE(s.await(1));
  CHECK(s.got.size() == 1);
  CHECK(s.got[0].scopeId == "after");
  CHECK(server.malformed() == 2);
}

TEST_CASE("the FIFO replaces a file at its path and is removed with the server", "[file_timer]") {
  const std::string dir = test::scratchDir("fts");
  const std::string path = dir + "/timer";
  std::ofstream(path) << "stale";
  {
    boost::asio::io_context io;
    FileTimerServer server(io, path);
    struct stat st {};
    REQUIRE(::stat(path.c_str(), &st) == 0);
    CHECK(S_ISFIFO(st.st_mode));
    CHECK((st.st_mode & 0777) == 0600);
    // Without a handler (between generations) requests are read and dropped.
    REQUIRE(clientWrite(path, request(41, "dropped", 5)));
    const auto deadline = std::chrono::steady_clock::now() + 10s;
    while (server.requests() < 1 && std::chrono::steady_clock::now() < deadline) io.run_for(20ms);
    CHECK(server.requests() == 1);
  }
  CHECK_FALSE(std::filesystem::exists(path));
  CHECK_FALSE(clientWrite(path, request(42, "late", 5)));  // no reader: a client's open fails
}

TEST_CASE("without a path the FIFO lives in a fresh temp folder, removed with it", "[file_timer]") {
  std::string path;
  {
    boost::asio::io_context io;
    FileTimerServer server(io, "");
    path = server.path();
    CHECK(path.find("ddprun_timer_") != std::string::npos);
    CHECK(std::filesystem::is_fifo(path));
  }
  CHECK_FALSE(std::filesystem::exists(std::filesystem::path(path).parent_path()));
}

TEST_CASE("a path that cannot hold a FIFO is a clear error", "[file_timer]") {
  boost::asio::io_context io;
  CHECK_THROWS_WITH(FileTimerServer(io, "/nonexistent-dir/timer"),
                    Catch::Contains("cannot create the worker timer FIFO /nonexistent-dir/timer"));
}

}  // namespace ddp
