// Round records (Rendezvous::publishRoundRecord / roundRecords): values the nodes of a round
// exchange before their workers start. They are found by node rank, a missing one is reported
// after the timeout, a round that ends ends the wait, and the keys go with the round's.
#include <catch2/catch.hpp>

#include <future>

#include "rendezvous/store/in_memory_store.hpp"
#include "tests/rendezvous/rendezvous_harness.hpp"

using namespace ddp;
using namespace ddp::test;

namespace {

RoundRecords records(const RoundRecordsResult& result) {
  if (auto* r = std::get_if<RoundRecords>(&result)) return *r;
  throw std::runtime_error("roundRecords() reported the round's end: " +
                           std::get<RoundEnded>(result).event.detail);
}

// Agents in node-rank order (a requests rank 0, b rank 1).
struct TwoNodes {
  InMemoryStore store;
  Agent a{store, fastSettings("rec", 2, 2), node("a", 1, 0)};
  Agent b{store, fastSettings("rec", 2, 2), node("b", 1, 1)};
};

}  // namespace

TEST_CASE("round records are found by node rank, waited for, and missing ones reported",
          "[rendezvous][records]") {
  TwoNodes n;
  checkConsistent(joinAll({&n.a, &n.b}));
  // b waits for a record that a publishes later: the wait returns it.
  auto waiting = std::async(std::launch::async, [&] {
    return records(n.b.rdzv->roundRecords("clock", {0}, 10s));
  });
  n.a.rdzv->publishRoundRecord("clock", "1234");
  CHECK(waiting.get() == RoundRecords{std::string("1234")});
  n.b.rdzv->publishRoundRecord("report", "from b");
  n.a.rdzv->publishRoundRecord("report", "from a");
  CHECK(records(n.a.rdzv->roundRecords("report", {1, 0}, 5s)) ==
        RoundRecords{std::string("from b"), std::string("from a")});
  // Nobody publishes "verdict" from rank 1: the timeout reports it missing.
  CHECK(records(n.a.rdzv->roundRecords("verdict", {0, 1}, 200ms)) == RoundRecords{std::nullopt, std::nullopt});
  CHECK_THROWS_AS(n.a.rdzv->publishRoundRecord("bad/name", "x"), ProtocolError);
}

TEST_CASE("a round that ends ends a wait for round records", "[rendezvous][records]") {
  TwoNodes n;
  checkConsistent(joinAll({&n.a, &n.b}));
  auto waiting = std::async(std::launch::async, [&] { return n.a.rdzv->roundRecords("x", {1}, 20s); });
  n.b.rdzv->leave();  // its node is gone: the round ends
  const RendezvousEvent end = roundEnded(waiting.get());
  CHECK(end.kind == RendezvousEventKind::kPeerLost);
  CHECK(end.lostRank == 1);
}

TEST_CASE("a record published before the round ended is still returned", "[rendezvous][records]") {
  TwoNodes n;
  checkConsistent(joinAll({&n.a, &n.b}));
  n.a.rdzv->publishRoundRecord("verdict", "failed");
  n.a.rdzv->leave();
  CHECK(records(n.b.rdzv->roundRecords("verdict", {0}, 5s)) == RoundRecords{std::string("failed")});
}

TEST_CASE("round records are deleted with their round", "[rendezvous][records]") {
  TwoNodes n;
  checkConsistent(joinAll({&n.a, &n.b}));
  const int64_t before = n.store.numKeys();
  n.a.rdzv->publishRoundRecord("report", "a");
  n.b.rdzv->publishRoundRecord("report", "b");
  n.a.rdzv->publishRoundRecord("verdict", "ok");
  CHECK(n.store.check({"rdzv/rec/0/r/0/rec/report/0", "rdzv/rec/0/r/0/rec/report/1",
                       "rdzv/rec/0/r/0/rec/verdict/0", "rdzv/rec/0/r/0/records"}));
  CHECK(n.store.numKeys() == before + 4);
  auto fa = std::async(std::launch::async, [&] { return n.a.rdzv->exitBarrier(10s); });
  CHECK(std::holds_alternative<AllSucceeded>(n.b.rdzv->exitBarrier(10s)));
  CHECK(std::holds_alternative<AllSucceeded>(fa.get()));
  n.a.rdzv->leave();
  n.b.rdzv->leave();
  CHECK(n.store.numKeys() == 2);  // inc, ended: the records went with the round
}
