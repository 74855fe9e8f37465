// The single-node path (ddprun --standalone): minNodes = maxNodes = 1 over an InMemoryStore.
#include <catch2/catch.hpp>

#include "rendezvous/store/in_memory_store.hpp"
#include "tests/rendezvous/rendezvous_harness.hpp"

using namespace ddp;
using namespace ddp::test;

TEST_CASE("single node: generation 0, rank 0, world = local world size", "[rendezvous]") {
  InMemoryStore store;
  Agent a(store, fastSettings("solo", 1, 1), node("alpha", 4));
  const RendezvousResult r = joined(a.rdzv->next());
  CHECK(r.generation == 0);
  CHECK(r.nodeRank == 0);
  CHECK(r.nodeCount == 1);
  CHECK(r.baseRank == 0);
  CHECK(r.worldSize == 4);
  CHECK(r.baseRoleRank == 0);
  CHECK(r.roleWorldSize == 4);
  CHECK(r.restartsUsed == 0);

  a.rdzv->publishWorkerStore("127.0.0.1", 41234);
  auto published = std::get<WorkerStoreEndpoint>(a.rdzv->workerStore());
  CHECK(published.addr == "127.0.0.1");
  CHECK(published.port == 41234);
  a.rdzv->publishWorkerStore("::1", 5);  // IPv6 addresses keep their colons
  published = std::get<WorkerStoreEndpoint>(a.rdzv->workerStore());
  CHECK(published.addr == "::1");
  CHECK(published.port == 5);

  a.watch();
  CHECK(std::holds_alternative<AllSucceeded>(a.rdzv->exitBarrier(2s)));
  a.rdzv->stopWatching();
  a.rdzv->leave();
  a.rdzv->leave();  // idempotent
  CHECK(a.events.count() == 0);
}

TEST_CASE("single node: restart budget, generations and failure records", "[rendezvous]") {
  InMemoryStore store;
  auto settings = fastSettings("solo-restarts", 1, 1);
  settings.maxRestarts = 2;
  Agent a(store, settings, node("alpha", 2));
  a.watch();
  CHECK(joined(a.rdzv->next()).generation == 0);
  CHECK(a.rdzv->failures().reportFailure(R"({"n":1})").kind ==
        RendezvousEventKind::kRestartRequested);
  RendezvousResult r = joined(a.rdzv->next());
  CHECK(r.generation == 1);
  CHECK(r.restartsUsed == 1);
  CHECK(a.rdzv->failures().reportFailure(R"({"n":2})").kind ==
        RendezvousEventKind::kRestartRequested);
  r = joined(a.rdzv->next());
  CHECK(r.generation == 2);
  CHECK(r.restartsUsed == 2);
  const RendezvousEvent spent =
      a.rdzv->failures().reportFailure(R"({"n":3})");  // budget of 2 spent
  CHECK(spent.kind == RendezvousEventKind::kJobFailed);
  CHECK_THAT(spent.detail, Catch::Contains("max_restarts=2"));
  CHECK(a.rdzv->failures().failureRecords() ==
        std::vector<std::string>{R"({"n":1})", R"({"n":2})", R"({"n":3})"});
  const JobEnded end = ended(a.rdzv->next());
  CHECK(end.result == JobResult::kFailed);
  CHECK(end.standing == NodeStanding::kMember);
  CHECK(end.lastGeneration == 2);
  // The failing node learns the outcome from reportFailure, not from a duplicate event.
  CHECK(a.events.count() == 0);
  a.rdzv->leave();
}

TEST_CASE("single node: the workerStore wait ends when the round ends", "[rendezvous]") {
  InMemoryStore store;
  auto settings = fastSettings("solo-ws", 1, 1);
  settings.maxRestarts = 1;
  Agent a(store, settings, node("alpha"));
  joined(a.rdzv->next());
  CHECK(a.rdzv->failures().reportFailure("{}").kind == RendezvousEventKind::kRestartRequested);
  CHECK(roundEnded(a.rdzv->workerStore()).kind == RendezvousEventKind::kRestartRequested);
  CHECK(roundEnded(a.rdzv->exitBarrier(2s)).kind == RendezvousEventKind::kRestartRequested);
}

TEST_CASE("single node: calls before next() and bad settings are clear errors", "[rendezvous]") {
  InMemoryStore store;
  Agent a(store, fastSettings("solo-bad", 1, 1), node("alpha"));
  CHECK_THROWS_WITH(a.rdzv->exitBarrier(1s), Catch::Contains("before next()"));
  CHECK_THROWS_AS(makeRendezvous(store, fastSettings("x", 3, 2), node("a")), ConfigError);
  CHECK_THROWS_AS(makeRendezvous(store, fastSettings("x", 1, 1), node("a", 0)), ConfigError);
}
