// StatusPublisher's connection to the rendezvous store (issue 18 item 2): opened when there is
// something to write, closed once idle, so an agent that is not node rank 0 holds two connections
// to the store while its job runs (its own and the heartbeat's), not three. A real StoreServer
// counts the connections.
#include <catch2/catch.hpp>

#include <chrono>
#include <memory>
#include <thread>

#include "launcher/status/status_publisher.hpp"
#include "rendezvous/algorithm/detail/rendezvous_keys.hpp"
#include "rendezvous/server/store_server.hpp"
#include "rendezvous/store/tcp_store_client.hpp"

using namespace ddp;
using namespace std::chrono_literals;

namespace {

// Polls `condition` for up to 20 s.
template <class F>
bool eventually(F condition) {
  const auto deadline = std::chrono::steady_clock::now() + 20s;
  while (std::chrono::steady_clock::now() < deadline) {
    if (condition()) return true;
    std::this_thread::sleep_for(10ms);
  }
  return condition();
}

}  // namespace

TEST_CASE("the publisher closes its store connection once idle and opens one to write", "[unit]") {
  StoreServerOptions serverOptions;
  serverOptions.host = "127.0.0.1";
  StoreServerThread server(serverOptions);
  TcpStoreClientOptions clientOptions;
  clientOptions.endpoint.port = server.port();
  TcpStoreClient reader(clientOptions);  // the test's own connection: always 1 open
  StatusPublisherSettings settings;
  settings.runId = "job";
  settings.host = "node-b";
  settings.connect = [clientOptions](std::chrono::milliseconds budget) {
    TcpStoreClientOptions o = clientOptions;
    o.connectTimeout = budget;
    return std::unique_ptr<Store>(std::make_unique<TcpStoreClient>(o));
  };
  settings.relayInterval = 50ms;
  settings.idleClose = 300ms;
  StatusPublisher publisher(settings);
  RendezvousResult round;
  round.generation = 0;
  round.nodeRank = 1;
  round.nodeCount = 2;
  round.worldSize = 2;
  const std::string key = detail::RendezvousKeys("job", 0).status(0, 1);

  publisher.beginGeneration(round, "", 0);
  CHECK(eventually([&] { return reader.check({key}); }));
  CHECK(eventually([&] { return server.stats().connectionsOpen == 1; }));  // the reader only
  CHECK(server.stats().connectionsAccepted == 2);

  publisher.endGeneration("succeeded", "every worker exited 0");  // written on a new connection
  CHECK(eventually([&] { return server.stats().connectionsAccepted == 3; }));
  CHECK(eventually([&] { return reader.get(key).find("succeeded") != std::string::npos; }));
  CHECK(eventually([&] { return server.stats().connectionsOpen == 1; }));
  publisher.finish();
}
