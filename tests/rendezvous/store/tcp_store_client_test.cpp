// TcpStoreClient in the v2 dialect against our StoreServerThread: every op, waits and their
// timeouts (CANCEL_WAIT keeps the connection usable), connect budgets, a server lost mid-call.
#include <catch2/catch.hpp>

#include <poll.h>

#include <atomic>
#include <cstring>
#include <fstream>
#include <functional>
#include <future>
#include <memory>
#include <optional>
#include <thread>

#include <boost/asio/io_context.hpp>
#include <boost/asio/ip/tcp.hpp>
#include <boost/asio/read.hpp>
#include <boost/asio/write.hpp>

#include "tests/rendezvous/store/closed_port.hpp"
#include "rendezvous/base/error.hpp"
#include "rendezvous/server/store_server.hpp"
#include "rendezvous/store/tcp_store_client.hpp"
#include "tests/fakes/scripted_server.hpp"
#include "tests/rendezvous/store_contract.hpp"

namespace ddp {
namespace {

using test::FakeServer;
using test::readHandshake;

using namespace std::chrono_literals;
using Clock = std::chrono::steady_clock;

StoreServerOptions loopbackServer() {
  StoreServerOptions options;
  options.host = "127.0.0.1";
  options.port = 0;
  options.name = "client-test store";
  return options;
}

std::unique_ptr<TcpStoreClient> connect(uint16_t port, const std::string& host = "127.0.0.1") {
  TcpStoreClientOptions options;
  options.endpoint = {host, port};
  options.connectTimeout = 30s;
  options.timeout = 30s;
  return std::make_unique<TcpStoreClient>(options);
}

using ddp::test::closedPort;


TEST_CASE("v2 client: a wrong PING echo fails the connect attempt", "[tcp_store_client]") {
  FakeServer server([](boost::asio::ip::tcp::socket& socket) {
    const uint32_t wrong = readHandshake(socket) + 1;
    boost::asio::write(socket, boost::asio::buffer(&wrong, sizeof(wrong)));
  });
  TcpStoreClientOptions options;
  options.endpoint.port = server.port();
  options.connectTimeout = 300ms;
  try {
    TcpStoreClient client(options);
    FAIL("connected although the PING echo was wrong");
  } catch (const TimeoutError& e) {
    CHECK_THAT(e.what(), Catch::Contains("PING echoed"));
  }
}

TEST_CASE("v2 client: a malformed reply is a sticky ProtocolError", "[tcp_store_client]") {
  std::promise<void> done;
  FakeServer server([&](boost::asio::ip::tcp::socket& socket) {
    const uint32_t nonce = readHandshake(socket);
    boost::asio::write(socket, boost::asio::buffer(&nonce, sizeof(nonce)));
    unsigned char check[1 + 8 + 8 + 1];  // CHECK of one 1-byte key
    boost::asio::read(socket, boost::asio::buffer(check));
    const unsigned char bogus = 7;  // neither READY nor NOT_READY
    boost::asio::write(socket, boost::asio::buffer(&bogus, 1));
    done.get_future().wait();  // keep the connection open: the error must come from the bytes
  });
  // Releases the fake before it is joined, also when an assertion below throws.
  struct Release {
    std::promise<void>& done;
    ~Release() { done.set_value(); }
  } release{done};
  TcpStoreClientOptions options;
  options.endpoint.port = server.port();
  TcpStoreClient client(options);
  try {
    client.check({"k"});
    FAIL("a bogus CHECK status was accepted");
  } catch (const ProtocolError& e) {
    CHECK_THAT(e.what(), Catch::Contains("CHECK") && Catch::Contains(client.endpoint()));
  }
  CHECK_THROWS_AS(client.add("k", 1), ProtocolError);  // sticky
}

TEST_CASE("v2 client: every op against StoreServerThread", "[tcp_store_client]") {
  StoreServerThread server(loopbackServer());
  auto client = connect(server.port());
  CHECK(client->endpoint() == "127.0.0.1:" + std::to_string(server.port()));
  test::checkSingleClientOps(*client, "ops/");
  test::checkWaitTimeouts(*client, "timeouts/");
  auto other = connect(server.port());
  test::checkWaitWakeups(*client, *other, "wakeups/");
}

TEST_CASE("v2 client: a wait timeout cancels the wait and keeps the connection in step",
          "[tcp_store_client]") {
  StoreServerThread server(loopbackServer());
  auto client = connect(server.port());
  auto other = connect(server.port());
  for (int round = 0; round < 5; ++round) {
    const std::string key = "late/" + std::to_string(round);
    try {
      client->wait({key, "present"}, 150ms);
      FAIL("wait on a missing key returned");
    } catch (const TimeoutError& e) {
      CHECK_THAT(e.what(), Catch::Contains(key) && Catch::Contains("150 ms") &&
                               Catch::Contains(client->endpoint()));
    }
    // Had the wait stayed parked, this set would push a stray 00 into the reply stream.
    other->set(key, "v");
    CHECK(client->add("counter", 1) == round + 1);
    CHECK(client->get(key) == "v");
  }
}

TEST_CASE("v2 client: compareSet creating a key releases waiters on ddprund",
          "[tcp_store_client]") {
  StoreServerThread server(loopbackServer());
  auto waiter = connect(server.port());
  auto other = connect(server.port());
  auto get = std::async(std::launch::async, [&] { return waiter->get("cas-created"); });
  CHECK(other->compareSet("cas-created", "", "v") == "v");
  REQUIRE(get.wait_for(30s) == std::future_status::ready);
  CHECK(get.get() == "v");
}

TEST_CASE("v2 client: a budget of milliseconds::max() means no deadline", "[tcp_store_client]") {
  StoreServerThread server(loopbackServer());
  auto waiter = connect(server.port());
  auto other = connect(server.port());
  waiter->setTimeout(std::chrono::milliseconds::max());
  auto get = std::async(std::launch::async, [&] { return waiter->get("eventually"); });
  CHECK(get.wait_for(100ms) == std::future_status::timeout);
  other->set("eventually", "v");
  REQUIRE(get.wait_for(30s) == std::future_status::ready);
  CHECK(get.get() == "v");
  CHECK(waiter->add("n", 1) == 1);
}

TEST_CASE("v2 client: host names and IPv6 resolve", "[tcp_store_client]") {
  StoreServerOptions dualStack = loopbackServer();
  dualStack.host = "::";
  StoreServerThread server(dualStack);
  auto byName = connect(server.port(), "localhost");
  byName->set("k", "v");
  CHECK(byName->get("k") == "v");
  if (std::ifstream("/proc/net/if_inet6").good()) {
    auto v6 = connect(server.port(), "::1");
    CHECK(v6->endpoint() == "[::1]:" + std::to_string(server.port()));
    CHECK(v6->get("k") == "v");
  }
}

TEST_CASE("v2 client: connect gives up at its budget with one line counting the attempts",
          "[tcp_store_client]") {
  TcpStoreClientOptions options;
  options.endpoint.port = closedPort();
  options.connectTimeout = 500ms;
  const auto start = Clock::now();
  try {
    TcpStoreClient client(options);
    FAIL("connected to a closed port");
  } catch (const TimeoutError& e) {
    const std::string message = e.what();
    const std::string endpoint = "127.0.0.1:" + std::to_string(options.endpoint.port);
    CHECK_THAT(message, Catch::StartsWith("timed out after 500 ms connecting to " + endpoint + " ("));
    CHECK_THAT(message, Catch::Contains(" attempts: ") &&
                            Catch::Contains("x " + endpoint + ": Connection refused"));
    CHECK(message.find('\n') == std::string::npos);
  }
  const auto elapsed = Clock::now() - start;
  CHECK(elapsed >= 500ms);
  CHECK(elapsed < 10s);
}

TEST_CASE("v2 client: connect retries until a late server comes up", "[tcp_store_client]") {
  const uint16_t port = closedPort();
  auto client = std::async(std::launch::async, [port] {
    TcpStoreClientOptions options;
    options.endpoint.port = port;
    options.connectTimeout = 60s;
    return std::make_unique<TcpStoreClient>(options);
  });
  CHECK(client.wait_for(100ms) == std::future_status::timeout);  // nobody listens yet
  StoreServerOptions late = loopbackServer();
  late.port = port;
  StoreServerThread server(late);
  REQUIRE(client.wait_for(60s) == std::future_status::ready);
  auto connected = client.get();
  CHECK(connected->add("n", 2) == 2);
}

TEST_CASE("v2 client: a server stopped mid-call gives a sticky NetworkError, not a hang",
          "[tcp_store_client]") {
  std::optional<StoreServerThread> server(std::in_place, loopbackServer());
  auto client = connect(server->port());
  client->set("k", "v");
  auto blocked = std::async(std::launch::async, [&] { client->wait({"never"}, 60s); });
  CHECK(blocked.wait_for(100ms) == std::future_status::timeout);
  const auto stoppedAt = Clock::now();
  server.reset();
  REQUIRE(blocked.wait_for(30s) == std::future_status::ready);
  CHECK(Clock::now() - stoppedAt < 30s);
  try {
    blocked.get();
    FAIL("wait returned although the server is gone");
  } catch (const NetworkError& e) {
    CHECK_THAT(e.what(), Catch::Contains(client->endpoint()) && Catch::Contains("never"));
  }
  CHECK_THROWS_AS(client->get("k"), NetworkError);  // sticky
  CHECK_THROWS_AS(client->set("k", "v"), NetworkError);
}

TEST_CASE("v2 client: concurrent callers on one client are serialised", "[tcp_store_client]") {
  StoreServerThread server(loopbackServer());
  auto client = connect(server.port());
  constexpr int kThreads = 8;
  constexpr int kOps = 200;
  std::vector<std::future<int>> workers;  // each returns its wrong answers (Catch2 asserts on
                                          // the main thread only)
  for (int t = 0; t < kThreads; ++t) {
    workers.push_back(std::async(std::launch::async, [&, t] {
      int wrong = 0;
      for (int i = 0; i < kOps; ++i) {
        const std::string key = "t" + std::to_string(t) + "/" + std::to_string(i);
        client->set(key, key);
        if (client->get(key) != key) ++wrong;
        client->add("total", 1);
      }
      return wrong;
    }));
  }
  for (auto& worker : workers) CHECK(worker.get() == 0);
  CHECK(client->get("total") == std::to_string(kThreads * kOps));
}

}  // namespace
}  // namespace ddp
