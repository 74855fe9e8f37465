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

#include "tests/rendezvous/daemon/ddprund_process.hpp"
#include "tests/rendezvous/raw_socket.hpp"

namespace {

using namespace std::chrono_literals;
using ddp::test::Daemon;
using ddp::test::portFilePath;
using ddp::test::waitForPortFile;

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
