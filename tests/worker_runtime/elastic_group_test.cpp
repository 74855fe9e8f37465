// In-place recovery's worker side: the quorum record, the agent's quorum board, and ElasticGroup
// rebuilding a communicator for a new quorum while the healthy ranks keep their "process" (ranks
// are threads here; the worker store is a real StoreServerThread on loopback).
#include <catch2/catch.hpp>

#include <atomic>
#include <chrono>
#include <memory>
#include <stdexcept>
#include <string>
#include <thread>
#include <vector>

#include "rendezvous/base/error.hpp"
#include "rendezvous/quorum/quorum_board.hpp"
#include "rendezvous/server/store_server.hpp"
#include "rendezvous/store/tcp_store_client.hpp"
#include "rendezvous/store/worker_store_keys.hpp"
#include "tests/rendezvous/store/closed_port.hpp"
#include "tests/error_of.hpp"
#include "tests/worker_runtime/quorum_fixture.hpp"
#include "tests/worker_runtime/rank_threads.hpp"
#include "worker_runtime/elastic_group.hpp"
#include "worker_runtime/state_agreement.hpp"

using namespace std::chrono_literals;
using ddp::testing::errorOf;
using ddp::test::envFor;
using ddp::test::loopbackStore;
using ddp::test::publishQuorum;
using ddp::test::recordFor;

namespace {

// Waits until the store holds more than `keys` keys (a rank wrote its build's address key); throws
// after 20 s naming `who`, so that a rank that never builds fails the test instead of hanging it.
void awaitNewKey(ddp::TcpStoreClient& watcher, int64_t keys, const std::string& who) {
  const auto deadline = std::chrono::steady_clock::now() + 20s;
  while (watcher.numKeys() <= keys) {
    if (std::chrono::steady_clock::now() > deadline) {
      throw std::runtime_error(who + " wrote no key within 20 s");
    }
    std::this_thread::yield();
  }
}

int64_t inPlaceCount(uint16_t port) {
  ddp::TcpStoreClientOptions o;
  o.endpoint = {"127.0.0.1", port};
  ddp::TcpStoreClient client(o);
  return client.add(ddp::inPlaceCountKey(0), 0);
}

}  // namespace

TEST_CASE("a quorum record survives its encoding; broken ones are refused by name", "[quorum]") {
  ddp::QuorumRecord r = recordFor(1, 4, 4242, 3);
  r.id.generation = 7;
  CHECK(ddp::decodeQuorumRecord(ddp::encodeQuorumRecord(r)) == r);
  CHECK(ddp::toString(r.id) == "7.3");
  CHECK_THAT(errorOf<ddp::ProtocolError>([] { ddp::decodeQuorumRecord("not json"); }),
             Catch::Contains("not a JSON object"));
  CHECK_THAT(errorOf<ddp::ProtocolError>([] { ddp::decodeQuorumRecord(R"({"generation": 1})"); }),
             Catch::Contains("no 'quorum'"));
  r.rank = 4;
  CHECK_THAT(errorOf<ddp::ProtocolError>([&] { ddp::decodeQuorumRecord(ddp::encodeQuorumRecord(r)); }),
             Catch::Contains("rank outside the world"));
}

TEST_CASE("the board carries each slot's newest record and wakes a waiter", "[quorum]") {
  ddp::QuorumBoard board(2);
  ddp::QuorumBoardReader reader(board.path(), 1);
  CHECK_FALSE(reader.read().has_value());
  const uint32_t before = reader.epoch();
  CHECK_FALSE(reader.waitForChange(before, 20ms));
  std::thread agent([&] { publishQuorum(board, 2, 5000, 0); });
  CHECK(reader.waitForChange(before, 10s));
  agent.join();
  CHECK(reader.epoch() != before);
  REQUIRE(reader.read().has_value());
  CHECK(reader.read()->rank == 1);
  publishQuorum(board, 2, 5000, 1);
  CHECK(reader.read()->id.quorum == 1);
  CHECK(reader.read()->replaced == std::vector<int>{1});

  CHECK_THAT(errorOf<ddp::Error>([&] { ddp::QuorumBoardReader(board.path(), 2); }), Catch::Contains("no slot 2"));
  CHECK_THAT(errorOf<ddp::Error>([] { ddp::QuorumBoardReader("/proc/self/status", 0); }),
             Catch::Contains("not a quorum board"));
  CHECK_THAT(errorOf<ddp::ConfigError>([&] { board.publish({{5, recordFor(0, 2, 5000, 0)}}); }),
             Catch::Contains("slot 5 outside 0..1"));
}

TEST_CASE("the ranks that did not fail rebuild for the replacement's quorum and go on",
          "[elastic]") {
  constexpr int kWorld = 3;
  ddp::StoreServerThread server(loopbackStore());
  ddp::QuorumBoard board(kWorld);
  publishQuorum(board, kWorld, server.port(), 0);

  std::atomic<int> built{0};
  std::vector<float> before(kWorld, -1), after(kWorld, -1);
  std::vector<ddp::QuorumId> ids(kWorld);
  std::vector<std::string> survivorErrors(kWorld);
  auto errors = ddp::test::runThreads(kWorld, [&](int rank, ddp::Store&) {
    auto env = envFor(rank, kWorld, server.port(), board);
    auto group = std::make_unique<ddp::ElasticGroup>(env, ddp::test::glooOptions(20s));
    CHECK(group->recoversInPlace());
    float v = float(rank + 1);
    group->comm().allreduce(&v, 1, ddp::DataType::kFloat32, ddp::ReduceOp::kSum);
    before[rank] = v;
    ++built;
    while (built.load() < kWorld) std::this_thread::yield();  // all summed once
    if (rank == 2) {
      group.reset();  // the failed worker: its connections close
      publishQuorum(board, kWorld, server.port(), 1);  // its agent publishes the next quorum
      env.stateFromPeer = true;  // a replacement's DDP_STATE_FROM_PEER=1
      group = std::make_unique<ddp::ElasticGroup>(env, ddp::test::glooOptions(20s));  // replacement
    } else {
      try {  // the old communicator is broken by rank 2's exit
        float w = 1;
        group->comm().allreduce(&w, 1, ddp::DataType::kFloat32, ddp::ReduceOp::kSum);
        survivorErrors[rank] = "no error";
      } catch (const ddp::CommError& e) {
        survivorErrors[rank] = e.what();
      }
      group->rebuild(20s);
    }
    float w = float(10 * (rank + 1));
    group->comm().allreduce(&w, 1, ddp::DataType::kFloat32, ddp::ReduceOp::kSum);
    after[rank] = w;
    ids[rank] = group->view().id;
    group->comm().barrier();
  });
  REQUIRE(ddp::test::firstError(errors) == "");
  CHECK(before == std::vector<float>(kWorld, 6));
  CHECK(after == std::vector<float>(kWorld, 60));
  for (int r = 0; r < kWorld; ++r) CHECK(ids[r] == ddp::QuorumId{0, 1});
  CHECK(survivorErrors[0] != "no error");
  CHECK(survivorErrors[1] != "no error");
  // Announced once per process; the replacement was counted for its rank by its predecessor.
  CHECK(inPlaceCount(server.port()) == kWorld);
}

TEST_CASE("a quorum superseded while it is being built is left for the newest", "[elastic]") {
  constexpr int kWorld = 2;
  ddp::StoreServerThread server(loopbackStore());
  ddp::QuorumBoard board(kWorld);
  publishQuorum(board, kWorld, server.port(), 0);
  std::vector<ddp::QuorumId> ids(kWorld);
  std::atomic<int> passed{0};
  auto errors = ddp::test::runThreads(kWorld, [&](int rank, ddp::Store&) {
    auto env = envFor(rank, kWorld, server.port(), board);
    ddp::ElasticGroup group(env, ddp::test::glooOptions(20s));
    group.comm().barrier();
    // Quorum 1 comes only once both ranks left quorum 0's barrier: published while rank 0 was
    // still in it, it superseded that barrier (rank 0 rightly aborted it and never built quorum 1,
    // and rank 1 waited for its key for good).
    ++passed;
    while (passed.load() < kWorld) std::this_thread::yield();
    if (rank == 0) {
      ddp::QuorumBoardReader mine(board.path(), 0);
      while (mine.read()->id.quorum < 1) mine.waitForChange(mine.epoch(), 100ms);
      group.rebuild(20s);  // starts on quorum 1, which rank 1 never joins
    } else {
      ddp::TcpStoreClientOptions o;
      o.endpoint = {"127.0.0.1", server.port()};
      ddp::TcpStoreClient watcher(o);
      const int64_t keys = watcher.numKeys();
      publishQuorum(board, kWorld, server.port(), 1);
      // Rank 0 is inside quorum 1's build once its address key is in the store.
      awaitNewKey(watcher, keys, "rank 0, building quorum 1,");
      publishQuorum(board, kWorld, server.port(), 2);
      group.rebuild(20s);
    }
    ids[rank] = group.view().id;
    group.comm().barrier();
  });
  REQUIRE(ddp::test::firstError(errors) == "");
  CHECK(ids[0] == ddp::QuorumId{0, 2});
  CHECK(ids[1] == ddp::QuorumId{0, 2});
}

TEST_CASE("no newer quorum within the budget, or no board: rebuild() is a CommError", "[elastic]") {
  ddp::StoreServerThread server(loopbackStore());
  ddp::QuorumBoard board(1);
  publishQuorum(board, 1, server.port(), 0);
  ddp::ElasticGroup group(envFor(0, 1, server.port(), board), ddp::test::glooOptions(5s));
  CHECK_FALSE(group.quorumChanged());
  CHECK_THAT(errorOf<ddp::CommError>([&] { group.rebuild(100ms); }),
             Catch::Contains("found no quorum to recover into within 100 ms"));

  auto plain = ddp::test::loopbackEnv(0, 1);
  plain.master.port = server.port();
  plain.useAgentStore = true;
  ddp::ElasticGroup without(plain, ddp::test::glooOptions(5s));
  CHECK_FALSE(without.recoversInPlace());
  CHECK_THAT(errorOf<ddp::CommError>([&] { without.rebuild(1s); }), Catch::Contains("no quorum board"));
}

TEST_CASE("a build that failed with no newer quorum: the rank gives up after the grace, not the "
          "budget", "[elastic]") {
  // Quorum 1's worker store refuses connections, so its build fails, and nothing publishes a newer
  // one (no peer died). The rank must not wait out its 60 s budget: its peers would wait in that
  // build for it as long.
  ddp::StoreServerThread server(loopbackStore());
  ddp::QuorumBoard board(1);
  publishQuorum(board, 1, server.port(), 0);
  ddp::ElasticGroup group(envFor(0, 1, server.port(), board), ddp::test::glooOptions(1s), 300ms);
  publishQuorum(board, 1, ddp::test::closedPort(), 1);
  const std::string error = errorOf<ddp::CommError>([&] { group.rebuild(60s); });
  CHECK_THAT(error, Catch::Contains("rank 0 could not build quorum 0.1: "));
  CHECK_THAT(error, Catch::Contains("no newer quorum came within 300 ms; this process exits"));
}

TEST_CASE("the donor is the lowest rank with the highest step; ranks that differ take its state",
          "[elastic]") {
  using D = ddp::StateDigest;
  auto a = ddp::agreeOnState({D{5, 1}, D{6, 9}, D{6, 9}, D{-1, 0}});
  CHECK(a.donor == 1);
  CHECK(a.state == D{6, 9});
  CHECK(a.differ == std::vector<int>{0, 3});
  auto same = ddp::agreeOnState({D{4, 2}, D{4, 2}});
  CHECK(same.donor == 0);
  CHECK(same.differ.empty());
  auto diverged = ddp::agreeOnState({D{4, 2}, D{4, 3}});
  CHECK(diverged.differ == std::vector<int>{1});
  const D d{int64_t(1) << 40, 0xfedcba9876543210ULL};
  CHECK(ddp::unpackDigest(ddp::packDigest(d).data()) == d);
}

TEST_CASE("a rank that finished the job: a replacement waiting for it gives up at once",
          "[elastic]") {
  // Rank 1 is killed after rank 0 did its last step: its replacement's quorum cannot form (rank 0
  // will not build again), so it fails with a line saying why, long before its 60 s budget.
  const bool finishedFirst = GENERATE(true, false);
  CAPTURE(finishedFirst);
  constexpr int kWorld = 2;
  ddp::StoreServerThread server(loopbackStore());
  ddp::QuorumBoard board(kWorld);
  publishQuorum(board, kWorld, server.port(), 0);
  std::atomic<bool> replacementDone{false};
  std::string replacementError = "no error";
  auto errors = ddp::test::runThreads(kWorld, [&](int rank, ddp::Store& shared) {
    auto env = envFor(rank, kWorld, server.port(), board);
    auto group = std::make_unique<ddp::ElasticGroup>(env, ddp::test::glooOptions(20s));
    group->comm().barrier();
    ddp::TcpStoreClientOptions o;
    o.endpoint = {"127.0.0.1", server.port()};
    ddp::TcpStoreClient watcher(o);
    if (rank == 0) {
      if (!finishedFirst) {
        // The replacement is inside quorum 1's build once its address key is in the store.
        shared.wait({"replacement-started"}, 30s);
        const int64_t keys = std::stoll(shared.get("keys-before"));
        awaitNewKey(watcher, keys, "the replacement, building quorum 1,");
      }
      group->markFinished();
      shared.set("finished", "1");
      while (!replacementDone.load()) std::this_thread::yield();  // keeps its process meanwhile
      return;
    }
    if (finishedFirst) shared.wait({"finished"}, 30s);
    group.reset();  // the killed worker
    shared.set("keys-before", std::to_string(watcher.numKeys()));
    publishQuorum(board, kWorld, server.port(), 1);
    shared.set("replacement-started", "1");
    try {
      ddp::ElasticGroup replacement(env, ddp::test::glooOptions(60s));
      replacementError = "built quorum " + ddp::toString(replacement.view().id);
    } catch (const ddp::CommError& e) {
      replacementError = e.what();
    }
    replacementDone = true;
  });
  REQUIRE(ddp::test::firstError(errors) == "");
  CHECK_THAT(replacementError,
             Catch::Contains("rank 0 of quorum 0.0 finished the job while this rank waited to build "
                             "quorum 0.1"));
  ddp::TcpStoreClientOptions o;
  o.endpoint = {"127.0.0.1", server.port()};
  CHECK(ddp::TcpStoreClient(o).get(ddp::finishedKey(0)) == "rank 0 of quorum 0.0");
}
