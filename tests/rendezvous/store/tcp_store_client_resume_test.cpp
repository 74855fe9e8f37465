// TcpStoreClient riding out a lost connection (ResumableConnection): a change whose reply was
// lost after the server applied it is sent again and applies once (REQUEST_ID), and a client
// resumes across a restart of its server from the data directory, a pending WAIT and its ON_CLOSE
// registration included.
#include <catch2/catch.hpp>

#include <chrono>
#include <future>
#include <memory>
#include <string>
#include <vector>

#include "rendezvous/base/error.hpp"
#include "rendezvous/server/store_server.hpp"
#include "rendezvous/store/tcp_store_client.hpp"
#include "rendezvous/wire/wire_codec.hpp"
#include "tests/rendezvous/dropping_proxy.hpp"
#include "tests/rendezvous/temp_dir.hpp"
#include "tests/loopback_store.hpp"

namespace ddp {
namespace {

using namespace std::chrono_literals;

TcpStoreClientOptions clientOptions(uint16_t port, std::chrono::milliseconds reconnect) {
  TcpStoreClientOptions options;
  options.endpoint = {"127.0.0.1", port};
  options.connectTimeout = 30s;
  options.timeout = 60s;
  options.reconnectBudget = reconnect;
  return options;
}

const std::vector<HelloField> kFields = {{"client", "ddprun"}, {"purpose", "test"}};

TEST_CASE("a change whose reply was lost after it applied is sent again and applies once") {
  StoreServerThread server(testing::loopbackStore("resume-test store"));
  test::DroppingProxy proxy(server.port());
  auto client = connectTcpStore(clientOptions(proxy.port(), 30s), wire::kCapRequestId, kFields);
  CHECK(client->add("n", 1) == 1);

  client->set("a", "1");  // no reply: kept until one arrives
  proxy.armDropNextReply();
  CHECK(client->add("n", 1) == 2);  // the server answers the retry with the kept reply
  CHECK(client->reconnects() == 1);
  CHECK(proxy.connections() == 2);

  proxy.armDropNextReply();
  client->append("log", "x");
  CHECK(client->add("n", 10) == 12);
  CHECK(client->reconnects() == 2);

  TcpStoreClient reader(clientOptions(server.port(), 0ms));
  CHECK(reader.get("n") == "12");
  CHECK(reader.get("a") == "1");
  CHECK(reader.get("log") == "x");  // the APPEND sent again was not applied twice
}

TEST_CASE("without a reconnect budget a lost connection stays a sticky NetworkError") {
  StoreServerThread server(testing::loopbackStore("resume-test store"));
  test::DroppingProxy proxy(server.port());
  auto client = connectTcpStore(clientOptions(proxy.port(), 0ms), wire::kCapRequestId, kFields);
  proxy.armDropNextReply();
  CHECK_THROWS_AS(client->add("n", 1), NetworkError);
  CHECK_THROWS_AS(client->numKeys(), NetworkError);
  CHECK(client->reconnects() == 0);
}

TEST_CASE("a client resumes across a restart of its server from the data directory") {
  test::TempDir dir;
  StoreServerOptions options = testing::loopbackStore("resume-test store");
  options.durability.dataDir = dir.path();
  auto first = std::make_unique<StoreServerThread>(options);
  options.port = first->port();
  auto client = connectTcpStore(clientOptions(options.port, 30s),
                                wire::kCapRequestId | wire::kCapOnClose, kFields);
  CHECK(client->add("n", 5) == 5);
  client->armOnClose("gone", "", "yes");

  // A WAIT that is pending on the first server when it goes.
  const uint64_t before = first->stats().requests;
  auto waiter = std::async(std::launch::async, [&] { client->wait({"late"}, 60s); });
  while (first->stats().requests == before) std::this_thread::yield();
  first->stop();
  first.reset();

  StoreServerThread second(options);  // same port, same data directory
  TcpStoreClient other(clientOptions(options.port, 0ms));
  CHECK(other.get("n") == "5");  // replayed
  other.set("late", "now");
  REQUIRE_NOTHROW(waiter.get());  // the WAIT was sent again and woke
  CHECK(client->reconnects() == 1);
  CHECK(client->add("n", 1) == 6);

  client.reset();  // the registration made on the first server was made again on the second
  CHECK(other.get("gone") == "yes");
}

TEST_CASE("a store that keeps no data is not waited for, nor resumed into after a restart") {
  // No data directory: kCapDurable is not granted.
  StoreServerOptions options = testing::loopbackStore("resume-test store");
  auto first = std::make_unique<StoreServerThread>(options);
  options.port = first->port();
  auto client = connectTcpStore(clientOptions(options.port, 60s), wire::kCapRequestId, kFields);
  CHECK(client->add("n", 5) == 5);

  SECTION("gone for good: a NetworkError after the short wait, not after the 60 s budget") {
    first->stop();
    first.reset();
    const auto start = std::chrono::steady_clock::now();
    CHECK_THROWS_WITH(client->add("n", 1), Catch::Contains("keeps no data"));
    CHECK(std::chrono::steady_clock::now() - start < 30s);
  }
  SECTION("restarted on its port without its keys: never resumed into") {
    first->stop();
    first.reset();
    StoreServerThread second(options);  // same port, empty
    CHECK_THROWS_WITH(client->add("n", 1), Catch::Contains("restarted without its data"));
    TcpStoreClient other(clientOptions(options.port, 0ms));
    CHECK_FALSE(other.check({"n"}));  // the retried ADD was not applied to the empty store
  }
  CHECK(client->reconnects() == 0);
}

}  // namespace
}  // namespace ddp
