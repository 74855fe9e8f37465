// The rendezvous over real sockets: a StoreServerThread (what ddprund and the embedded store run)
// and one TcpStoreClient connection per agent, on loopback with port 0.
#include <catch2/catch.hpp>

#include <future>
#include <thread>

#include "rendezvous/server/store_server.hpp"
#include "rendezvous/store/tcp_store_client.hpp"
#include "rendezvous/wire/wire_codec.hpp"
#include "tests/rendezvous/rendezvous_harness.hpp"

using namespace ddp;
using namespace ddp::test;

namespace {

// The heartbeat connection ddprun opens: HELLO for ddprun's ON_CLOSE, every call bounded.
StoreConnector heartbeatConnector(uint16_t port) {
  return [port](std::chrono::milliseconds budget) -> std::unique_ptr<Store> {
    TcpStoreClientOptions o;
    o.endpoint = {"127.0.0.1", port};
    o.connectTimeout = budget;
    o.timeout = budget;
    return connectTcpStore(o, wire::kCapOnClose, {{"client", "test"}});
  };
}

// An agent with its own connection, as on a real node (and, with `heartbeat`, the heartbeat
// thread's own connection too).
struct TcpAgent {
  TcpAgent(uint16_t port, RendezvousSettings settings, NodeDescriptor self,
           bool heartbeat = false)
      : client(options(port)),
        agent(client, std::move(settings), std::move(self),
              heartbeat ? heartbeatConnector(port) : StoreConnector()) {}
  static TcpStoreClientOptions options(uint16_t port) {
    TcpStoreClientOptions o;
    o.endpoint = {"127.0.0.1", port};
    o.connectTimeout = 10s;
    o.timeout = 30s;
    return o;
  }
  TcpStoreClient client;
  Agent agent;
};

StoreServerOptions loopback() {
  StoreServerOptions o;
  o.host = "127.0.0.1";
  o.port = 0;
  o.name = "rdzv-test";
  return o;
}

}  // namespace

TEST_CASE("four agents over TCP: join, restart, lose one, finish", "[rendezvous][tcp]") {
  StoreServerThread server(loopback());
  auto settings = fastSettings("tcp-job", 3, 4);
  settings.maxRestarts = 2;
  settings.heartbeatTimeout = 1500ms;
  std::vector<std::unique_ptr<TcpAgent>> agents;
  for (int i = 0; i < 4; ++i) {
    agents.push_back(std::make_unique<TcpAgent>(server.port(), settings,
                                                node("t" + std::to_string(i), 1 + i % 2)));
  }
  auto all = [&] {
    std::vector<Agent*> ptrs;
    for (auto& a : agents) ptrs.push_back(&a->agent);
    return ptrs;
  };
  const auto first = joinAll(all());
  checkConsistent(first);
  CHECK(first[0].nodeCount == 4);
  CHECK(first[0].worldSize == 6);
  for (auto& a : agents) a->agent.watch();

  // Node rank 0 hosts the worker store; the others read its address.
  for (size_t i = 0; i < agents.size(); ++i) {
    if (first[i].nodeRank == 0) agents[i]->agent.rdzv->publishWorkerStore("127.0.0.1", 40001);
  }
  for (auto& a : agents) {
    CHECK(std::get<WorkerStoreEndpoint>(a->agent.rdzv->workerStore()).port == 40001);
  }

  // A worker failure on one node restarts every node in the same new generation.
  CHECK(agents[2]->agent.rdzv->failures().reportFailure(R"({"host":"t2"})").kind ==
        RendezvousEventKind::kRestartRequested);
  for (size_t i : {0, 1, 3}) {
    const auto event = agents[i]->agent.events.waitFor(10s);
    REQUIRE(event);
    CHECK(event->kind == RendezvousEventKind::kRestartRequested);
  }
  const auto second = joinAll(all());
  checkConsistent(second);
  CHECK(second[0].generation == 1);
  CHECK(second[0].restartsUsed == 1);
  for (size_t i = 0; i < agents.size(); ++i) CHECK(second[i].nodeRank == first[i].nodeRank);

  // SIGKILL-like loss of one agent (its connection closes, no leave()).
  for (auto& a : agents) a->agent.events.clear();
  agents.erase(agents.begin() + 1);
  for (auto& a : agents) {
    const auto event = a->agent.events.waitFor(15s);
    REQUIRE(event);
    CHECK(event->kind == RendezvousEventKind::kPeerLost);
  }
  const auto third = joinAll(all());
  checkConsistent(third);
  CHECK(third[0].generation == 2);
  CHECK(third[0].nodeCount == 3);
  CHECK(third[0].restartsUsed == 1);  // losing a node is free

  std::vector<std::future<ExitBarrierResult>> barrier;
  for (auto& a : agents) {
    barrier.push_back(std::async(std::launch::async,
                                 [&a] { return a->agent.rdzv->exitBarrier(10s); }));
  }
  for (auto& f : barrier) CHECK(std::holds_alternative<AllSucceeded>(f.get()));
  CHECK(agents[0]->agent.rdzv->failures().failureRecords() ==
        std::vector<std::string>{R"({"host":"t2"})"});
  for (auto& a : agents) a->agent.rdzv->leave();
  // The last agent to leave deleted the job's keys: only the run's tombstone is left (its
  // incarnation counter and `ended`; a succeeded job keeps no failure records).
  CHECK(agents[0]->client.numKeys() == 2);
  CHECK(agents[0]->client.check({"rdzv/tcp-job/inc", "rdzv/tcp-job/0/ended"}));
}

TEST_CASE("the store going away is reported as kStoreLost", "[rendezvous][tcp]") {
  auto server = std::make_unique<StoreServerThread>(loopback());
  auto settings = fastSettings("tcp-store-lost", 1, 1);
  settings.heartbeatTimeout = 600ms;
  TcpAgent a(server->port(), settings, node("s0"));
  joined(a.agent.rdzv->next());
  a.agent.watch();
  server->stop();
  const auto event = a.agent.events.waitFor(15s);
  REQUIRE(event);
  CHECK(event->kind == RendezvousEventKind::kStoreLost);
  CHECK_THAT(event->detail, Catch::Contains("heartbeat_timeout 600 ms"));
}

TEST_CASE("over ddprun's ON_CLOSE a vanished agent ends the round at once; one that left does not",
          "[rendezvous][tcp][liveness]") {
  StoreServerThread server(loopback());
  auto settings = fastSettings("tcp-on-close", 2, 3);
  settings.heartbeatTimeout = 60s;  // so the heartbeat cannot be what ends the round
  std::vector<std::unique_ptr<TcpAgent>> agents;
  for (int i = 0; i < 3; ++i) {
    agents.push_back(std::make_unique<TcpAgent>(server.port(), settings,
                                                node("c" + std::to_string(i)), true));
  }
  const auto rounds = joinAll({&agents[0]->agent, &agents[1]->agent, &agents[2]->agent});
  for (auto& a : agents) a->agent.watch();
  TcpStoreClient observer(TcpAgent::options(server.port()));
  // A heartbeat thread arms ON_CLOSE before its first tick: once agent 2's counter moved, its
  // connection is armed.
  const std::string hb = "rdzv/tcp-on-close/0/r/0/hb/" + std::to_string(rounds[2].nodeRank);
  const auto armedBy = std::chrono::steady_clock::now() + 20s;
  while (observer.add(hb, 0) < 1 && std::chrono::steady_clock::now() < armedBy) {
    std::this_thread::sleep_for(20ms);
  }
  REQUIRE(observer.add(hb, 0) >= 1);
  const auto start = std::chrono::steady_clock::now();
  agents[2].reset();  // its process died: the connections close without leave()
  for (int i : {0, 1}) {
    const auto event = agents[i]->agent.events.waitFor(20s);
    REQUIRE(event);
    CHECK(event->kind == RendezvousEventKind::kPeerLost);
    CHECK_THAT(event->detail, Catch::Contains("lost its connection to the rendezvous store"));
  }
  CHECK(std::chrono::steady_clock::now() - start < 20s);  // not the 60 s heartbeat_timeout
  CHECK(observer.get("rdzv/tcp-on-close/0/round") == "1");
}
