// Multi-node rounds with agents as threads over one InMemoryStore: ranks, world sizes, requested
// ranks, the addresses node rank 0 serves, scale-up by a late joiner, spares, and too few nodes.
#include <catch2/catch.hpp>

#include <future>
#include <thread>

#include "rendezvous/store/in_memory_store.hpp"
#include "tests/rendezvous/rendezvous_harness.hpp"

using namespace ddp;
using namespace ddp::test;

TEST_CASE("two nodes: one round, consistent ranks", "[rendezvous]") {
  InMemoryStore store;
  Agent a(store, fastSettings("two", 2, 2), node("host-b", 2));
  Agent b(store, fastSettings("two", 2, 2), node("host-a", 2));
  const auto results = joinAll({&a, &b});
  checkConsistent(results);
  CHECK(results[0].generation == 0);
  CHECK(results[0].worldSize == 4);
  // No --node-rank: a fresh job orders nodes by (host, addr, pid).
  CHECK(results[1].nodeRank == 0);
  CHECK(results[0].nodeRank == 1);
  CHECK(results[0].baseRank == 2);
}

TEST_CASE("memberAddresses: every node's advertised address, then its interface addresses, once each",
          "[rendezvous]") {
  InMemoryStore store;
  NodeDescriptor n0 = node("n0", 1, 0), n1 = node("n1", 1, 1);
  n0.addr = "10.31.3.1";
  n0.interfaceAddrs = {"10.31.2.1", "10.31.3.1"};
  n1.addr = "10.31.2.2";  // advertised on one link, reaching node 0 through the other
  n1.interfaceAddrs = {"10.31.2.2", "10.31.3.2", "fd00::2"};
  Agent a(store, fastSettings("nics", 2, 2), n0);
  Agent b(store, fastSettings("nics", 2, 2), n1);
  checkConsistent(joinAll({&a, &b}));
  CHECK(a.rdzv->memberAddresses() ==
        std::vector<std::string>{"10.31.3.1", "10.31.2.1", "10.31.2.2", "10.31.3.2", "fd00::2"});
}

TEST_CASE("four nodes with mixed local world sizes: contiguous global ranks", "[rendezvous]") {
  InMemoryStore store;
  const int sizes[] = {2, 1, 3, 4};
  std::vector<std::unique_ptr<Agent>> agents;
  std::vector<Agent*> ptrs;
  for (int i = 3; i >= 0; --i) {
    agents.push_back(std::make_unique<Agent>(store, fastSettings("four", 4, 4),
                                             node("n" + std::to_string(i), sizes[i])));
    ptrs.push_back(agents.back().get());
  }
  const auto results = joinAll(ptrs);
  checkConsistent(results);
  const auto& r = results.front();
  CHECK(r.worldSize == 10);
  CHECK(r.roleWorldSize == 10);
  // Agent i is host n(3 - i); a fresh job orders nodes by host.
  const int bases[] = {0, 2, 3, 6};
  for (int i = 0; i < 4; ++i) {
    CHECK(results[i].nodeRank == 3 - i);
    CHECK(results[i].baseRank == bases[3 - i]);
  }
  for (size_t i = 0; i < results.size(); ++i) {
    CHECK(results[i].baseRoleRank == results[i].baseRank);  // one role
  }
}

TEST_CASE("requested node ranks are honoured; conflicts are clear errors", "[rendezvous]") {
  InMemoryStore store;
  SECTION("honoured, the others fill the gaps in host order") {
    Agent a(store, fastSettings("req", 4, 4), node("a", 1, 3));
    Agent b(store, fastSettings("req", 4, 4), node("b"));
    Agent c(store, fastSettings("req", 4, 4), node("c", 1, 0));
    Agent d(store, fastSettings("req", 4, 4), node("d"));
    const auto results = joinAll({&a, &b, &c, &d});
    checkConsistent(results);
    CHECK(results[0].nodeRank == 3);
    CHECK(results[1].nodeRank == 1);
    CHECK(results[2].nodeRank == 0);
    CHECK(results[3].nodeRank == 2);
  }
  SECTION("two nodes asking for the same rank fail the job on every node") {
    Agent a(store, fastSettings("dup", 2, 2), node("a", 1, 1));
    Agent b(store, fastSettings("dup", 2, 2), node("b", 1, 1));
    auto fa = std::async(std::launch::async, [&] { return a.rdzv->next(); });
    auto fb = std::async(std::launch::async, [&] { return b.rdzv->next(); });
    CHECK_THROWS_WITH(fa.get(), Catch::Contains("both asked for node rank 1"));
    CHECK_THROWS_WITH(fb.get(), Catch::Contains("both asked for node rank 1"));
    // The job failed: an agent that was no part of it starts the run id's next job.
    auto lateSettings = fastSettings("dup", 2, 2);
    lateSettings.joinTimeout = 300ms;
    Agent late(store, lateSettings, node("c"));
    CHECK_THROWS_AS(late.rdzv->next(), TimeoutError);  // alone in the new job
    CHECK(store.get("rdzv/dup/inc") == "1");
  }
  SECTION("a rank outside the round") {
    Agent a(store, fastSettings("out", 1, 1), node("a", 1, 5));
    CHECK_THROWS_WITH(joined(a.rdzv->next()), Catch::Contains("asked for node rank 5"));
  }
}

TEST_CASE("a late joiner scales the job up; previous ranks stay stable", "[rendezvous]") {
  InMemoryStore store;
  const auto settings = fastSettings("scale", 2, 4);
  Agent a(store, settings, node("m1"));
  Agent b(store, settings, node("m2"));
  const auto first = joinAll({&a, &b});
  checkConsistent(first);
  REQUIRE(first[0].nodeCount == 2);  // closed lastCallTimeout after min_nodes
  a.watch();
  b.watch();
  Agent c(store, settings, node("m0"));  // sorts first by host, but is new
  auto fc = std::async(std::launch::async, [&] { return joined(c.rdzv->next()); });
  for (Agent* running : {&a, &b}) {
    const auto event = running->events.waitFor(10s);
    REQUIRE(event);
    CHECK(event->kind == RendezvousEventKind::kScaleUp);
    CHECK(event->generation == 0);
    CHECK_THAT(event->detail, Catch::Contains("m0"));
  }
  auto fa = std::async(std::launch::async, [&] { return joined(a.rdzv->next()); });
  auto fb = std::async(std::launch::async, [&] { return joined(b.rdzv->next()); });
  const std::vector<RendezvousResult> second{fa.get(), fb.get(), fc.get()};
  checkConsistent(second);
  CHECK(second[0].generation == 1);
  CHECK(second[0].nodeCount == 3);
  CHECK(second[0].restartsUsed == 0);  // scale-up is free
  CHECK(second[0].nodeRank == first[0].nodeRank);
  CHECK(second[1].nodeRank == first[1].nodeRank);
  CHECK(second[2].nodeRank == 2);
}

TEST_CASE("a full round keeps a late joiner as a spare until a node leaves", "[rendezvous]") {
  InMemoryStore store;
  const auto settings = fastSettings("spare", 1, 2);
  Agent a(store, settings, node("s1"));
  Agent b(store, settings, node("s2"));
  checkConsistent(joinAll({&a, &b}));
  b.watch();
  Agent spare(store, settings, node("s3"));
  auto fs = std::async(std::launch::async, [&] { return joined(spare.rdzv->next()); });
  CHECK(fs.wait_for(500ms) == std::future_status::timeout);  // waits, does not disturb
  CHECK(b.events.count() == 0);
  a.rdzv->leave();
  const auto event = b.events.waitFor(10s);
  REQUIRE(event);
  CHECK(event->kind == RendezvousEventKind::kPeerLost);
  CHECK_THAT(event->detail, Catch::Contains("left the job"));
  auto fb = std::async(std::launch::async, [&] { return joined(b.rdzv->next()); });
  const std::vector<RendezvousResult> next{fb.get(), fs.get()};
  checkConsistent(next);
  CHECK(next[0].generation == 1);
  CHECK(next[0].nodeCount == 2);
}

TEST_CASE("a late joiner does not restart a finishing job; it learns the job ended; a later "
          "agent starts the run's next job", "[rendezvous]") {
  InMemoryStore store;
  const auto settings = fastSettings("finishing", 2, 4);
  Agent a(store, settings, node("f1"));
  Agent b(store, settings, node("f2"));
  checkConsistent(joinAll({&a, &b}));
  b.watch();
  auto fa = std::async(std::launch::async, [&] { return a.rdzv->exitBarrier(20s); });
  // Wait until a is inside the barrier (it bumped the barrier counter).
  const auto deadline = std::chrono::steady_clock::now() + 10s;
  while (!store.check({"rdzv/finishing/0/r/0/exit"}) &&
         std::chrono::steady_clock::now() < deadline) {
    std::this_thread::yield();
  }
  Agent c(store, settings, node("f0"));
  auto fc = std::async(std::launch::async, [&] { return c.rdzv->next(); });
  CHECK(fc.wait_for(500ms) == std::future_status::timeout);
  CHECK(b.events.count() == 0);  // no scale-up while finishing
  CHECK(std::holds_alternative<AllSucceeded>(b.rdzv->exitBarrier(10s)));
  CHECK(std::holds_alternative<AllSucceeded>(fa.get()));
  const JobEnded late = ended(fc.get());
  CHECK(late.result == JobResult::kSucceeded);
  CHECK(late.standing == NodeStanding::kNeverMember);  // it ran nothing
  CHECK_THAT(late.reason, Catch::Contains("all 2 node(s) of generation 0 succeeded"));
  // An agent arriving after the job ended was no part of it: it starts the run's next job.
  auto fresh = settings;
  fresh.minNodes = 1;
  Agent d(store, fresh, node("f9"));
  const RendezvousResult r = joined(d.rdzv->next());
  CHECK(r.generation == 0);
  CHECK(r.nodeCount == 1);
  CHECK(store.get("rdzv/finishing/inc") == "1");
}

TEST_CASE("an agent that dies between drawing a slot and writing its record is left out",
          "[rendezvous]") {
  InMemoryStore store;
  auto settings = fastSettings("half-joined", 2, 2);
  settings.heartbeatTimeout = 500ms;
  REQUIRE(store.add("rdzv/half-joined/0/r/0/count", 1) == 1);  // the dead agent's slot
  Agent a(store, settings, node("h1"));
  Agent b(store, settings, node("h2"));
  auto fa = std::async(std::launch::async, [&] { return joined(a.rdzv->next()); });
  // Round 0 closes without a quorum once the missing record stays missing; round 1 forms.
  auto fb = std::async(std::launch::async, [&] { return joined(b.rdzv->next()); });
  const std::vector<RendezvousResult> results{fa.get(), fb.get()};
  checkConsistent(results);
  CHECK(results[0].nodeCount == 2);
  CHECK(results[0].generation == 1);
}

TEST_CASE("a round whose closing agent died is abandoned; the next round forms",
          "[rendezvous]") {
  InMemoryStore store;
  auto settings = fastSettings("dead-closer", 2, 2);
  settings.heartbeatTimeout = 500ms;
  store.set("rdzv/dead-closer/0/r/0/closer", "an agent that died after winning the election");
  Agent a(store, settings, node("d1"));
  Agent b(store, settings, node("d2"));
  const auto started = std::chrono::steady_clock::now();
  const auto results = joinAll({&a, &b});
  checkConsistent(results);
  CHECK(results[0].generation == 1);
  CHECK(results[0].nodeCount == 2);
  CHECK(std::chrono::steady_clock::now() - started >= 2 * settings.heartbeatTimeout);
  CHECK_THAT(store.get("rdzv/dead-closer/0/r/0/end"), Catch::Contains("stopped before publishing"));
}

TEST_CASE("too few nodes: TimeoutError naming the counts", "[rendezvous]") {
  InMemoryStore store;
  auto settings = fastSettings("few", 3, 3);
  settings.joinTimeout = 800ms;
  Agent a(store, settings, node("lonely"));
  Agent b(store, settings, node("lonelier"));
  auto fa = std::async(std::launch::async, [&] { return a.rdzv->next(); });
  const auto started = std::chrono::steady_clock::now();
  CHECK_THROWS_WITH(b.rdzv->next(), Catch::Contains("2 node(s) joined") &&
                                        Catch::Contains("min_nodes=3") &&
                                        Catch::Contains("join_timeout"));
  CHECK_THROWS_AS(fa.get(), TimeoutError);
  CHECK(std::chrono::steady_clock::now() - started < 10s);
}
