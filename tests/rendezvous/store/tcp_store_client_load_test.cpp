// 64 TcpStoreClients x 1000 ops at once against one StoreServerThread: every answer correct.
//
// Each client, per round: SET its own key, GET its neighbour's key of the same round (a blocking
// WAIT + GET that the neighbour's SET releases), ADD a shared counter, COMPARE_SET a key of its
// own twice (create, then swap).
#include <catch2/catch.hpp>

#include <latch>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "rendezvous/server/store_server.hpp"
#include "rendezvous/store/tcp_store_client.hpp"

namespace ddp {
namespace {

using namespace std::chrono_literals;

constexpr int kClients = 64;
constexpr int kRounds = 200;  // x 5 ops = 1000 ops per client

std::string keyOf(int client, int round) {
  return "c" + std::to_string(client) + "/r" + std::to_string(round);
}

// Runs one client; returns the number of wrong answers (Catch2 asserts on the main thread only).
int runClient(uint16_t port, int id, std::latch& start, std::string& error) {
  int wrong = 0;
  try {
    TcpStoreClientOptions options;
    options.endpoint.port = port;
    options.timeout = 60s;
    TcpStoreClient client(options);
    start.arrive_and_wait();
    const int neighbour = (id + 1) % kClients;
    for (int round = 0; round < kRounds; ++round) {
      const std::string mine = keyOf(id, round);
      client.set(mine, mine);
      if (client.get(keyOf(neighbour, round)) != keyOf(neighbour, round)) ++wrong;
      if (client.add("counter", 1) < 1) ++wrong;
      if (client.compareSet("cas/" + mine, "", mine) != mine) ++wrong;
      if (client.compareSet("cas/" + mine, mine, "!") != "!") ++wrong;
    }
  } catch (const std::exception& e) {
    error = e.what();
    ++wrong;
  }
  return wrong;
}

TEST_CASE("64 clients x 1000 ops against one server are all answered correctly",
          "[tcp_store_client][load]") {
  StoreServerOptions serverOptions;
  serverOptions.host = "127.0.0.1";
  serverOptions.name = "load-test store";
  StoreServerThread server(serverOptions);

  std::latch start(kClients);
  std::vector<int> wrong(kClients, 0);
  std::vector<std::string> errors(kClients);
  std::vector<std::thread> threads;
  for (int id = 0; id < kClients; ++id) {
    threads.emplace_back([&, id] { wrong[id] = runClient(server.port(), id, start, errors[id]); });
  }
  for (auto& thread : threads) thread.join();

  for (int id = 0; id < kClients; ++id) {
    INFO("client " << id << ": " << errors[id]);
    CHECK(wrong[id] == 0);
  }
  TcpStoreClientOptions options;
  options.endpoint.port = server.port();
  TcpStoreClient checker(options);
  CHECK(checker.get("counter") == std::to_string(kClients * kRounds));
  CHECK(checker.numKeys() == 2 * kClients * kRounds + 1);
  CHECK(checker.get(keyOf(17, kRounds - 1)) == keyOf(17, kRounds - 1));
  CHECK(checker.get("cas/" + keyOf(17, kRounds - 1)) == "!");
}

}  // namespace
}  // namespace ddp
