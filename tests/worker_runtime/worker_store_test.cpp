// connectWorkerStore over real loopback sockets: ranks (threads) reach a StoreServerThread at
// MASTER_ADDR:MASTER_PORT, build a Gloo communicator through it and allreduce; rank 0 hosts the
// store when TORCHELASTIC_USE_AGENT_STORE is not True; an unreachable store fails within budget.
#include <catch2/catch.hpp>

#include <chrono>
#include <memory>
#include <string>
#include <vector>

#include <boost/asio/io_context.hpp>
#include <boost/asio/ip/tcp.hpp>

#include "rendezvous/base/error.hpp"
#include "rendezvous/server/store_server.hpp"
#include "rendezvous/store/tcp_store_client.hpp"
#include "tests/worker_runtime/rank_threads.hpp"
#include "worker_runtime/worker_store.hpp"

using namespace std::chrono_literals;
using Clock = std::chrono::steady_clock;

namespace {

ddp::StoreServerOptions loopbackServer() {
  ddp::StoreServerOptions options;
  options.host = "127.0.0.1";
  options.port = 0;
  options.name = "worker-store test";
  return options;
}

// Each rank connects, builds a Gloo communicator through the store and sums its rank + 1.
std::vector<float> allreduceThroughStore(int size, uint16_t port, bool useAgentStore,
                                         int restartCount, std::string& error) {
  std::vector<float> results(size, -1.0f);
  auto errors = ddp::test::runThreads(size, [&](int rank, ddp::Store&) {
    auto env = ddp::test::loopbackEnv(rank, size);
    env.master.port = port;
    env.useAgentStore = useAgentStore;
    env.restartCount = restartCount;
    auto store = ddp::connectWorkerStore(env, 20s);
    auto comm = ddp::makeCommunicator(env, *store, ddp::test::glooOptions(20s));
    float value = static_cast<float>(rank + 1);
    comm->allreduce(&value, 1, ddp::DataType::kFloat32, ddp::ReduceOp::kSum);
    results[rank] = value;
    comm->barrier();  // nobody closes its store while another still reads from it
  });
  error = ddp::test::firstError(errors);
  return results;
}

}  // namespace

TEST_CASE("ranks meet through the agent's store under /worker/attempt_<n>/", "[worker_store]") {
  ddp::StoreServerThread server(loopbackServer());
  std::string error;
  auto results = allreduceThroughStore(3, server.port(), /*useAgentStore=*/true, 2, error);
  REQUIRE(error == "");
  CHECK(results == std::vector<float>(3, 6.0f));

  ddp::TcpStoreClientOptions options;
  options.endpoint.port = server.port();
  ddp::TcpStoreClient observer(options);
  CHECK(observer.check({"/worker/attempt_2/ddp/comm/gloo/0"}));
  CHECK_FALSE(observer.check({"ddp/comm/gloo/0"}));
}

TEST_CASE("without the agent store, rank 0 hosts the worker store on MASTER_PORT",
          "[worker_store]") {
  // A port that was free a moment ago; rank 0 binds it (loopback, so a clash is very unlikely).
  uint16_t port = 0;
  {
    boost::asio::io_context io;
    boost::asio::ip::tcp::acceptor probe(
        io, boost::asio::ip::tcp::endpoint(boost::asio::ip::make_address("127.0.0.1"), 0));
    port = probe.local_endpoint().port();
  }
  std::string error;
  auto results = allreduceThroughStore(2, port, /*useAgentStore=*/false, 0, error);
  REQUIRE(error == "");
  CHECK(results == std::vector<float>(2, 3.0f));
}

TEST_CASE("an unreachable worker store fails within the connect budget", "[worker_store]") {
  // Bound but not listening: connections are refused for as long as this socket lives.
  boost::asio::io_context io;
  boost::asio::ip::tcp::socket holder(io);
  holder.open(boost::asio::ip::tcp::v4());
  holder.bind({boost::asio::ip::make_address("127.0.0.1"), 0});
  auto env = ddp::test::loopbackEnv(1, 2);
  env.master.port = holder.local_endpoint().port();
  env.useAgentStore = true;
  auto start = Clock::now();
  CHECK_THROWS_AS(ddp::connectWorkerStore(env, 500ms), ddp::Error);
  CHECK(Clock::now() - start < 15s);
}
