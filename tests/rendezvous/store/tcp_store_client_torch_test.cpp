// TcpStoreClient in the v1a dialect against torch 1.13's own TCPStore server (/usr/bin/python3).
#include <catch2/catch.hpp>

#include <future>
#include <memory>

#include "rendezvous/base/error.hpp"
#include "rendezvous/store/prefix_store.hpp"
#include "rendezvous/store/tcp_store_client.hpp"
#include "tests/rendezvous/raw_socket.hpp"
#include "tests/rendezvous/store_contract.hpp"
#include "tests/rendezvous/store/torch_store_process.hpp"

namespace ddp {
namespace {

using namespace std::chrono_literals;

test::TorchStoreProcess& torchServer() {
  static test::TorchStoreProcess server;  // one python start for the whole executable
  return server;
}

std::unique_ptr<TcpStoreClient> connectV1a() {
  TcpStoreClientOptions options;
  options.endpoint.port = torchServer().port();
  options.dialect = WireDialect::kV1a;
  options.connectTimeout = 30s;
  options.timeout = 30s;
  return std::make_unique<TcpStoreClient>(options);
}

TEST_CASE("v1a client: every op against torch 1.13's server", "[tcp_store_client][torch]") {
  auto client = connectV1a();
  CHECK(client->endpoint() == "127.0.0.1:" + std::to_string(torchServer().port()));
  test::checkSingleClientOps(*client, "ops/");
}

TEST_CASE("v1a client: waits are released by another client", "[tcp_store_client][torch]") {
  auto waiter = connectV1a();
  auto other = connectV1a();
  test::checkWaitWakeups(*waiter, *other, "wakeups/", /*appendWakes=*/false);
}

TEST_CASE("torch 1.13's server has no BARRIER: it closes the connection that sends one",
          "[tcp_store_client][torch]") {
  // What docs/ddprund.md says of BARRIER: torch 1.13's server (the legacy one) knows query types
  // up to CANCEL_WAIT = 11; opcode 18 (BARRIER of the v2 numbering, and nothing in 1.13's) with a
  // key and a world size is an unexpected query, and the server drops that connection only.
  test::RawSocket raw(torchServer().port());
  std::string request(1, '\x12');
  const std::string key = "/bar";
  const uint64_t size = key.size();
  const int64_t world = 2;
  request.append(reinterpret_cast<const char*>(&size), 8).append(key);
  request.append(reinterpret_cast<const char*>(&world), 8);
  raw.send(request);
  CHECK(raw.closedByPeer());
  auto client = connectV1a();
  client->set("after-barrier", "ok");
  CHECK(client->get("after-barrier") == "ok");
}

TEST_CASE("v1a client: keys interoperate with torch's '/' key layout", "[tcp_store_client][torch]") {
  auto client = connectV1a();
  PrefixStore torchKeys("", *client);
  torchKeys.set("shared", "v");
  CHECK(client->get("/shared") == "v");
  CHECK(torchKeys.add("n", 3) == 3);
  CHECK(torchKeys.deleteKey("n"));
}

TEST_CASE("v1a client: a wait timeout makes the client unusable, the server stays fine",
          "[tcp_store_client][torch]") {
  auto client = connectV1a();
  const auto start = std::chrono::steady_clock::now();
  try {
    client->wait({"v1a/never"}, 300ms);
    FAIL("wait on a missing key returned");
  } catch (const TimeoutError& e) {
    CHECK_THAT(e.what(), Catch::Contains("v1a/never") && Catch::Contains("300 ms"));
  }
  CHECK(std::chrono::steady_clock::now() - start >= 300ms);
  // A late STOP_WAITING would now desynchronise the stream: every later call refuses.
  try {
    client->add("v1a/x", 1);
    FAIL("a call after a v1a wait timeout succeeded");
  } catch (const NetworkError& e) {
    CHECK_THAT(e.what(), Catch::Contains("unusable"));
  }
  CHECK_THROWS_AS(client->numKeys(), NetworkError);
  auto fresh = connectV1a();
  fresh->set("v1a/never", "now");
  CHECK(fresh->add("v1a/x", 5) == 5);
}

}  // namespace
}  // namespace ddp
