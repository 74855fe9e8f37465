// The run-id lifecycle: a run id whose job ended starts a fresh job (incarnation) for an agent
// that was no part of it; keys of ended rounds and jobs are deleted, so a store holds O(live jobs)
// keys; a store hosted by an agent of another run is refused at once.
#include <catch2/catch.hpp>

#include <future>

#include "rendezvous/store/in_memory_store.hpp"
#include "rendezvous/server/store_server.hpp"
#include "rendezvous/store/tcp_store_client.hpp"
#include "rendezvous_harness.hpp"

using namespace ddp;
using namespace ddp::test;

TEST_CASE("a run id whose job failed starts a fresh job for a new agent", "[rendezvous][lifecycle]") {
  InMemoryStore store;
  auto settings = fastSettings("reuse", 1, 1);
  {
    Agent first(store, settings, node("a"));
    joined(first.rdzv->next());
    CHECK(first.rdzv->reportFailure(R"({"n":1})").kind == RendezvousEventKind::kJobFailed);
    first.rdzv->leave();
  }
  // What a restarted pod does: same run id, no memory of the job before.
  Agent second(store, settings, node("a"));
  const RendezvousResult r = joined(second.rdzv->next());
  CHECK(r.generation == 0);
  CHECK(r.restartsUsed == 0);
  CHECK(second.rdzv->failureRecords().empty());
  CHECK(store.get("rdzv/reuse/inc") == "1");
  CHECK(store.check({"rdzv/reuse/0/ended", "rdzv/reuse/0/failures"}));  // still readable
  CHECK(std::holds_alternative<AllSucceeded>(second.rdzv->exitBarrier(5s)));
  second.rdzv->leave();
  // Only the newest job's tombstone is kept: the counter and `ended`.
  CHECK(store.numKeys() == 2);
  CHECK(store.check({"rdzv/reuse/inc", "rdzv/reuse/1/ended"}));
}

TEST_CASE("a long job keeps a bounded number of keys; ended jobs leave a tombstone",
          "[rendezvous][lifecycle]") {
  InMemoryStore store;
  auto settings = fastSettings("long", 2, 2);
  settings.maxRestarts = 50;
  Agent a(store, settings, node("a"));
  Agent b(store, settings, node("b"));
  std::vector<int64_t> keys;
  for (int generation = 0; generation < 8; ++generation) {
    checkConsistent(joinAll({&a, &b}));
    keys.push_back(store.numKeys());
    CHECK(a.rdzv->reportFailure("{}").kind == RendezvousEventKind::kRestartRequested);
  }
  // Two rounds' keys at most: the count stops growing once old rounds are deleted.
  CHECK(keys[7] == keys[3]);
  checkConsistent(joinAll({&a, &b}));
  auto fa = std::async(std::launch::async, [&] { return a.rdzv->exitBarrier(10s); });
  CHECK(std::holds_alternative<AllSucceeded>(b.rdzv->exitBarrier(10s)));
  CHECK(std::holds_alternative<AllSucceeded>(fa.get()));
  a.rdzv->leave();
  b.rdzv->leave();
  CHECK(store.numKeys() == 2);  // inc, ended
}

TEST_CASE("every node leaving a job that did not end ends it and deletes its keys",
          "[rendezvous][lifecycle]") {
  InMemoryStore store;
  const auto settings = fastSettings("abandoned", 2, 2);
  Agent a(store, settings, node("a"));
  Agent b(store, settings, node("b"));
  checkConsistent(joinAll({&a, &b}));
  a.rdzv->leave();  // e.g. both agents got SIGTERM
  b.rdzv->leave();
  CHECK(store.numKeys() == 2);
  CHECK_THAT(store.get("rdzv/abandoned/0/ended"), Catch::Contains("left the job"));
}

TEST_CASE("a store hosted by an agent of another run is refused at once",
          "[rendezvous][lifecycle][tcp]") {
  StoreServerOptions options;
  options.host = "127.0.0.1";
  options.name = "hosted rendezvous store";
  options.initialKeys = {{rendezvousOwnerKey(), "59.0"}};
  StoreServerThread server(options);
  TcpStoreClientOptions client;
  client.host = "127.0.0.1";
  client.port = server.port();
  TcpStoreClient store(client);
  Agent stranger(store, fastSettings("159.0", 1, 1), node("n2"));
  CHECK_THROWS_WITH(stranger.rdzv->next(), Catch::Contains("belongs to run '59.0'") &&
                                               Catch::Contains("DDP_SLURM_PORT"));
  CHECK(store.numKeys() == 1);  // it wrote nothing there
  Agent owner(store, fastSettings("59.0", 1, 1), node("n1"));
  CHECK(joined(owner.rdzv->next()).nodeCount == 1);
}
