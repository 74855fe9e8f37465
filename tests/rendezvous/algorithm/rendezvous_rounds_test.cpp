// Rounds that cannot split, and members that drop out: a newcomer scales a running job up into
// one bigger world (never a parallel one), a timed-out join is withdrawn atomically with respect
// to the closer, a node declared lost rejoins as a newcomer, and a dropped node learns how the job
// ended. Agents are threads over one InMemoryStore; a PausableStore stands in for SIGSTOP.
#include <catch2/catch.hpp>

#include <future>

#include "tests/rendezvous/algorithm/pausable_store.hpp"
#include "rendezvous/store/in_memory_store.hpp"
#include "tests/rendezvous/rendezvous_harness.hpp"

using namespace ddp;
using namespace ddp::test;

namespace {

RendezvousSettings livenessSettings(const std::string& runId, int minNodes, int maxNodes) {
  auto s = fastSettings(runId, minNodes, maxNodes);
  s.heartbeatTimeout = 1500ms;  // a starved thread on a loaded CI box must not look dead
  return s;
}

}  // namespace

TEST_CASE("a newcomer scales a running round up into one bigger world, never a parallel one",
          "[rendezvous][rounds]") {
  for (int attempt = 0; attempt < 3; ++attempt) {
    InMemoryStore store;
    const auto settings = fastSettings("split-" + std::to_string(attempt), 1, 2);
    Agent a(store, settings, node("a"));
    REQUIRE(joined(a.rdzv->next()).nodeCount == 1);  // closed alone after the last call
    a.watch();
    Agent b(store, settings, node("b"));
    auto fb = std::async(std::launch::async, [&] { return joined(b.rdzv->next()); });
    const auto event = a.events.waitFor(10s);
    REQUIRE(event);
    CHECK(event->kind == RendezvousEventKind::kScaleUp);
    // a is slow to stop its workers: several last calls pass, yet b may not close a round of its
    // own while a (still heartbeating) has neither rejoined nor gone.
    CHECK(fb.wait_for(3 * settings.lastCallTimeout) == std::future_status::timeout);
    const std::vector<RendezvousResult> both{joined(a.rdzv->next()), fb.get()};
    checkConsistent(both);
    CHECK(both[0].generation == 1);
    CHECK(both[0].nodeCount == 2);
  }
}

TEST_CASE("a previous member silent for heartbeat_timeout does not hold the next round",
          "[rendezvous][rounds]") {
  InMemoryStore store;
  PausableStore aStore(store);
  auto settings = livenessSettings("silent-member", 1, 2);
  Agent a(aStore, settings, node("a"));
  REQUIRE(joined(a.rdzv->next()).nodeCount == 1);
  aStore.pause();  // like SIGSTOP: no heartbeat, no leave
  Agent b(store, settings, node("b"));
  const auto started = std::chrono::steady_clock::now();
  const RendezvousResult rb = joined(b.rdzv->next());  // ends round 0, waits for a, then alone
  CHECK(rb.generation == 1);
  CHECK(rb.nodeCount == 1);
  CHECK(std::chrono::steady_clock::now() - started >= settings.heartbeatTimeout);
  aStore.resume();
}

TEST_CASE("a timed-out join withdraws: the closer never counts it", "[rendezvous][rounds]") {
  InMemoryStore store;
  auto impatient = fastSettings("withdraw", 2, 2);
  impatient.joinTimeout = 400ms;
  Agent a(store, impatient, node("a"));
  CHECK_THROWS_WITH(a.rdzv->next(), Catch::Contains("join_timeout") &&
                                        Catch::Contains("withdrew"));
  CHECK(store.get("rdzv/withdraw/0/r/0/node/1") == "-");
  Agent b(store, fastSettings("withdraw", 2, 2), node("b"));
  Agent c(store, fastSettings("withdraw", 2, 2), node("c"));
  const auto results = joinAll({&b, &c});
  checkConsistent(results);
  CHECK(results[0].nodeCount == 2);
  // b and c hold both ranks: a is not "node rank 1 of 2" with nobody.
}

TEST_CASE("a joiner whose connection closed (its record marked dead) is no member",
          "[rendezvous][rounds]") {
  // What ddprund's ON_CLOSE does for an agent killed after it wrote its join record: the record
  // becomes "x" before the closer reads it.
  InMemoryStore store;
  const auto settings = fastSettings("died-joining", 2, 3);
  store.compareSet("rdzv/died-joining/inc", "", "0");
  store.compareSet("rdzv/died-joining/0/round", "", "0");
  REQUIRE(store.add("rdzv/died-joining/0/r/0/count", 1) == 1);
  store.set("rdzv/died-joining/0/r/0/node/1", "x");
  Agent b(store, settings, node("b"));
  Agent c(store, settings, node("c"));
  const auto results = joinAll({&b, &c});
  checkConsistent(results);
  CHECK(results[0].generation == 0);
  CHECK(results[0].nodeCount == 2);
  CHECK(results[0].worldSize == 2);
}

TEST_CASE("a join that times out as the round closes with it stays a member",
          "[rendezvous][rounds]") {
  InMemoryStore store;
  PausableStore aStore(store);
  auto impatient = fastSettings("withdraw-race", 2, 2);
  impatient.joinTimeout = 400ms;
  Agent a(aStore, impatient, node("a"));
  Agent b(store, fastSettings("withdraw-race", 2, 2), node("b"));
  std::future<RendezvousResult> fb;
  // Right before a withdraws its record, b joins and closes the round with a's record in it.
  aStore.beforeCompareSetTo("-", [&] {
    fb = std::async(std::launch::async, [&] { return joined(b.rdzv->next()); });
    fb.wait();
  });
  const std::vector<RendezvousResult> both{joined(a.rdzv->next()), fb.get()};
  checkConsistent(both);
  CHECK(both[0].nodeCount == 2);
}

TEST_CASE("a node declared lost rejoins as a newcomer and the job scales back up",
          "[rendezvous][rounds][liveness]") {
  InMemoryStore store;
  PausableStore cStore(store);
  const auto settings = livenessSettings("comeback", 2, 3);
  Agent a(store, settings, node("k0"));
  Agent b(store, settings, node("k1"));
  Agent c(cStore, settings, node("k2"));
  const auto first = joinAll({&a, &b, &c});
  checkConsistent(first);
  const int lost = first[2].nodeRank;
  for (Agent* x : {&a, &b, &c}) x->watch();
  cStore.pause();
  for (Agent* x : {&a, &b}) {
    const auto event = x->events.waitFor(15s);
    REQUIRE(event);
    CHECK(event->kind == RendezvousEventKind::kPeerLost);
    CHECK(event->lostRank == lost);
    x->events.clear();
  }
  const auto second = joinAll({&a, &b});  // c is known lost: nobody waits for it
  checkConsistent(second);
  CHECK(second[0].generation == 1);
  CHECK(second[0].nodeCount == 2);
  cStore.resume();
  const auto told = c.events.waitFor(15s);
  REQUIRE(told);
  CHECK(told->generation == 0);
  CHECK(told->lostRank == lost);  // it learns that it was the one declared lost
  auto fc = std::async(std::launch::async, [&] { return joined(c.rdzv->next()); });
  for (Agent* x : {&a, &b}) {
    const auto event = x->events.waitFor(15s);
    REQUIRE(event);
    CHECK(event->kind == RendezvousEventKind::kScaleUp);
  }
  auto fa = std::async(std::launch::async, [&] { return joined(a.rdzv->next()); });
  auto fb = std::async(std::launch::async, [&] { return joined(b.rdzv->next()); });
  const std::vector<RendezvousResult> third{fa.get(), fb.get(), fc.get()};
  checkConsistent(third);
  CHECK(third[0].generation == 2);
  CHECK(third[0].nodeCount == 3);
  CHECK(third[0].restartsUsed == 0);
}

TEST_CASE("a dropped node learns that the job went on without it and how it ended",
          "[rendezvous][rounds][liveness]") {
  InMemoryStore store;
  PausableStore bStore(store);
  auto settings = livenessSettings(GENERATE(std::string("dropped-ok"), "dropped-failed"), 1, 2);
  const bool fails = settings.runId == "dropped-failed";
  Agent a(store, settings, node("a"));
  Agent b(bStore, settings, node("b"));
  checkConsistent(joinAll({&a, &b}));
  a.watch();
  b.watch();
  bStore.pause();
  const auto lost = a.events.waitFor(15s);
  REQUIRE(lost);
  CHECK(lost->kind == RendezvousEventKind::kPeerLost);
  const RendezvousResult alone = joined(a.rdzv->next());
  CHECK(alone.nodeCount == 1);
  if (fails) {
    CHECK(a.rdzv->failures().reportFailure(R"({"from":"a"})").kind ==
          RendezvousEventKind::kJobFailed);
  } else {
    CHECK(std::holds_alternative<AllSucceeded>(a.rdzv->exitBarrier(10s)));
  }
  a.rdzv->leave();  // the last member of the last round: deletes the job's keys
  bStore.resume();
  REQUIRE(b.events.waitFor(15s));  // its round is gone
  const JobEnded end = ended(b.rdzv->next());
  CHECK(end.standing == NodeStanding::kDropped);
  CHECK(end.memberGeneration == 0);
  CHECK(end.lastGeneration == 1);
  CHECK(end.result == (fails ? JobResult::kFailed : JobResult::kSucceeded));
  if (fails) CHECK(b.rdzv->failures().failureRecords() ==
        std::vector<std::string>{R"({"from":"a"})"});
}
