// TcpStoreClient's connect loop says what it waits for while it waits (progress reports), and
// gives up with one short line that counts the attempts by kind, whatever the number of attempts.
#include <catch2/catch.hpp>

#include <regex>

#include <boost/asio/io_context.hpp>
#include <boost/asio/ip/tcp.hpp>

#include "tests/rendezvous/store/closed_port.hpp"
#include "rendezvous/base/error.hpp"
#include "rendezvous/store/tcp_store_client.hpp"

using namespace std::chrono_literals;
using ddp::ConnectProgress;
using ddp::TcpStoreClient;
using ddp::TcpStoreClientOptions;

namespace {

using ddp::test::closedPort;

// Options that fail fast and often: a short backoff, frequent reports into `reports`.
TcpStoreClientOptions failingFast(std::vector<ConnectProgress>& reports) {
  TcpStoreClientOptions options;
  options.connectTimeout = 1s;
  options.connectBackoff = {2ms, 10ms, 2.0, 0.0};
  options.connectProgressInterval = 50ms;
  options.onConnectProgress = [&reports](const ConnectProgress& p) { reports.push_back(p); };
  return options;
}

}  // namespace

TEST_CASE("a refused connect reports progress from the first failure on", "[connect_progress]") {
  std::vector<ConnectProgress> reports;
  TcpStoreClientOptions options = failingFast(reports);
  options.endpoint.port = closedPort();
  const std::string endpoint = "127.0.0.1:" + std::to_string(options.endpoint.port);
  std::string message;
  try {
    TcpStoreClient client(options);
    FAIL("connected to a closed port");
  } catch (const ddp::TimeoutError& e) {
    message = e.what();
  }
  REQUIRE(reports.size() >= 2);
  CHECK(reports.front().attempts == 1);  // at once, not after an interval
  CHECK(reports.front().endpoint == endpoint);
  CHECK(reports.front().budget == 1s);
  CHECK_THAT(reports.front().lastFailure, Catch::Contains(endpoint + ": Connection refused"));
  for (std::size_t i = 1; i < reports.size(); ++i) {
    CHECK(reports[i].attempts > reports[i - 1].attempts);
    CHECK(reports[i].elapsed >= reports[i - 1].elapsed);
  }
  // Dozens of attempts, still one short line.
  CHECK(reports.back().attempts >= 10);
  CHECK(message.size() < 300);
  std::smatch count;
  REQUIRE(std::regex_search(message, count, std::regex("\\((\\d+) attempts: ")));
  CHECK(std::stoi(count[1]) >= reports.back().attempts);
}

TEST_CASE("a name that does not resolve is a NetworkError, not a usage error", "[connect_progress]") {
  std::vector<ConnectProgress> reports;
  TcpStoreClientOptions options = failingFast(reports);
  options.endpoint.host = "nosuchhost.invalid";  // RFC 6761: never resolves
  options.connectTimeout = 300ms;
  try {
    TcpStoreClient client(options);
    FAIL("resolved nosuchhost.invalid");
  } catch (const ddp::ConfigError& e) {
    FAIL("a DNS failure was reported as a usage error: " << e.what());
  } catch (const ddp::NetworkError& e) {
    CHECK_THAT(e.what(), Catch::StartsWith("could not resolve the host of nosuchhost.invalid:29400 within 300 ms ("));
    CHECK_THAT(e.what(), Catch::Contains("x resolving 'nosuchhost.invalid': "));
  }
  REQUIRE_FALSE(reports.empty());
  CHECK_THAT(reports.front().lastFailure, Catch::StartsWith("resolving 'nosuchhost.invalid': "));
}
