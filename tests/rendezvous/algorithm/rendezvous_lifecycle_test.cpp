// The run-id lifecycle: a run id whose job ended starts a fresh job (incarnation) for an agent
// that was no part of it; keys of ended rounds and jobs are deleted, so a store holds O(live jobs)
// keys; a store hosted by an agent of another run is refused at once, and so is an agent of
// another job (job fingerprint) under a run id that a running job holds.
#include <catch2/catch.hpp>

#include <future>

#include "rendezvous/algorithm/detail/rendezvous_keys.hpp"
#include "rendezvous/algorithm/detail/rendezvous_lifecycle.hpp"
#include "rendezvous/store/in_memory_store.hpp"
#include "rendezvous/server/store_server.hpp"
#include "rendezvous/store/tcp_store_client.hpp"
#include "tests/rendezvous/rendezvous_harness.hpp"

using namespace ddp;
using namespace ddp::test;

TEST_CASE("a run id whose job failed starts a fresh job for a new agent", "[rendezvous][lifecycle]") {
  InMemoryStore store;
  auto settings = fastSettings("reuse", 1, 1);
  {
    Agent first(store, settings, node("a"));
    joined(first.rdzv->next());
    CHECK(first.rdzv->failures().reportFailure(R"({"n":1})").kind ==
          RendezvousEventKind::kJobFailed);
    first.rdzv->leave();
  }
  // What a restarted pod does: same run id, no memory of the job before.
  Agent second(store, settings, node("a"));
  const RendezvousResult r = joined(second.rdzv->next());
  CHECK(r.generation == 0);
  CHECK(r.restartsUsed == 0);
  CHECK(second.rdzv->failures().failureRecords().empty());
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
    CHECK(a.rdzv->failures().reportFailure("{}").kind == RendezvousEventKind::kRestartRequested);
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
  client.endpoint = {"127.0.0.1", server.port()};
  TcpStoreClient store(client);
  Agent stranger(store, fastSettings("159.0", 1, 1), node("n2"));
  CHECK_THROWS_WITH(stranger.rdzv->next(), Catch::Contains("belongs to run '59.0'") &&
                                               Catch::Contains("DDP_SLURM_PORT"));
  CHECK(store.numKeys() == 1);  // it wrote nothing there
  Agent owner(store, fastSettings("59.0", 1, 1), node("n1"));
  CHECK(joined(owner.rdzv->next()).nodeCount == 1);
}

namespace {

RendezvousSettings jobSettings(const std::string& runId, int minNodes, int maxNodes,
                               const std::string& fingerprint) {
  auto s = fastSettings(runId, minNodes, maxNodes);
  s.jobFingerprint = fingerprint;
  return s;
}

}  // namespace

TEST_CASE("another job under the same run id is refused at once; the running job is untouched",
          "[rendezvous][lifecycle]") {
  InMemoryStore store;
  // An elastic job with room for more nodes: a newcomer of the same job would scale it up.
  Agent a(store, jobSettings("none", 1, 3, "train.py, nnodes 1:3"), node("a"));
  a.watch();
  joined(a.rdzv->next());
  const int64_t keys = store.numKeys();
  Agent other(store, jobSettings("none", 1, 3, "eval.py, nnodes 1:3"), node("c"));
  CHECK_THROWS_WITH(other.rdzv->next(),
                    Catch::Contains("rendezvous 'none': another job is running under this run id") &&
                        Catch::Contains("it runs: train.py, nnodes 1:3; this one: eval.py, nnodes 1:3") &&
                        Catch::Contains("--rdzv-id") && Catch::Contains("node c"));
  CHECK(store.numKeys() == keys);  // it wrote nothing
  CHECK_FALSE(store.check({"rdzv/none/0/r/0/end"}));  // the running round did not end
  // Another node range is another job too.
  Agent wider(store, jobSettings("none", 1, 4, "train.py, nnodes 1:4"), node("d"));
  CHECK_THROWS_WITH(wider.rdzv->next(), Catch::Contains("this one: train.py, nnodes 1:4"));
  // An agent of the same job joins as before: it scales the running round up.
  Agent b(store, jobSettings("none", 1, 3, "train.py, nnodes 1:3"), node("b"));
  auto bJoins = std::async(std::launch::async, [&] { return joined(b.rdzv->next()); });
  const auto event = a.events.waitFor(10s);
  REQUIRE(event);
  CHECK(event->kind == RendezvousEventKind::kScaleUp);
  checkConsistent({joined(a.rdzv->next()), bJoins.get()});
}

TEST_CASE("a run id is free for another job once its job ended", "[rendezvous][lifecycle]") {
  InMemoryStore store;
  {
    Agent first(store, jobSettings("none", 1, 1, "train.py, nnodes 1:1"), node("a"));
    joined(first.rdzv->next());
    CHECK(std::holds_alternative<AllSucceeded>(first.rdzv->exitBarrier(5s)));
    first.rdzv->leave();
  }
  CHECK_FALSE(store.check({"rdzv/none/0/job"}));  // deleted with the job's keys
  Agent next(store, jobSettings("none", 1, 1, "eval.py, nnodes 1:1"), node("b"));
  CHECK(joined(next.rdzv->next()).generation == 0);
  CHECK(store.get("rdzv/none/inc") == "1");
  CHECK(store.get("rdzv/none/1/job") == "eval.py, nnodes 1:1");
}

TEST_CASE("claimIncarnation: the first fingerprint holds it; an ended incarnation is read again",
          "[rendezvous][lifecycle]") {
  InMemoryStore store;
  const detail::RendezvousKeys keys("job7", 0);
  CHECK(detail::claimIncarnation(store, keys, "", "n") == detail::IncarnationClaim::kJoined);
  CHECK_FALSE(store.check({keys.job()}));  // no fingerprint claims nothing
  CHECK(detail::claimIncarnation(store, keys, "a.py, nnodes 2:2", "n") == detail::IncarnationClaim::kJoined);
  CHECK(detail::claimIncarnation(store, keys, "a.py, nnodes 2:2", "n") == detail::IncarnationClaim::kJoined);
  CHECK(detail::claimIncarnation(store, keys, "", "n") == detail::IncarnationClaim::kJoined);
  CHECK_THROWS_AS(detail::claimIncarnation(store, keys, "b.py, nnodes 2:2", "n"), Error);
  CHECK(store.get(keys.job()) == "a.py, nnodes 2:2");
  // The job ended between the caller's look at the incarnation and its claim.
  store.set(keys.ended(), detail::encodeJobEnd(detail::jobEndNow(true, 0, "done")));
  CHECK(detail::claimIncarnation(store, keys, "b.py, nnodes 2:2", "n") == detail::IncarnationClaim::kEnded);
}

TEST_CASE("a job fingerprint longer than the bound is a ConfigError", "[rendezvous][lifecycle]") {
  InMemoryStore store;
  auto settings = jobSettings("job7", 1, 1, std::string(kMaxJobFingerprint + 1, 'x'));
  CHECK_THROWS_AS(makeRendezvous(store, settings, node("a")), ConfigError);
}
