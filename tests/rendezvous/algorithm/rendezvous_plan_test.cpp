// The round plan (pure): what the closing agent computes once per round — every member's
// assignment — and its codec.
#include <catch2/catch.hpp>

#include "rendezvous/algorithm/detail/rendezvous_plan.hpp"

using namespace ddp;
using namespace ddp::detail;

namespace {

JoinRecord member(int64_t slot, const std::string& host, int lws, const std::string& role) {
  JoinRecord r;
  r.slot = slot;
  r.node.host = host;
  r.node.localWorldSize = lws;
  r.node.role = role;
  return r;
}

const Assignment& bySlot(const RoundPlan& plan, int64_t slot) {
  for (const auto& [s, a] : plan.bySlot) {
    if (s == slot) return a;
  }
  throw std::runtime_error("no assignment for slot " + std::to_string(slot));
}

}  // namespace

TEST_CASE("plan: contiguous global ranks, per-role ranks, one assignment per member",
          "[rendezvous]") {
  RoundMembership m;
  m.generation = 3;
  m.restartsUsed = 1;
  m.members = {member(5, "a", 2, "trainer"), member(2, "b", 3, "eval"),
               member(9, "c", 4, "trainer")};
  const RoundPlan plan = planRound(m);
  CHECK(plan.header.nodeCount == 3);
  CHECK(plan.header.worldSize == 9);
  REQUIRE(plan.bySlot.size() == 3);
  const RendezvousResult r = resultOf(bySlot(plan, 9));
  CHECK(r.generation == 3);
  CHECK(r.restartsUsed == 1);
  CHECK(r.nodeRank == 2);
  CHECK(r.nodeCount == 3);
  CHECK(r.baseRank == 5);
  CHECK(r.worldSize == 9);
  CHECK(r.baseRoleRank == 2);
  CHECK(r.roleWorldSize == 6);
  CHECK(resultOf(bySlot(plan, 2)).baseRank == 2);
  CHECK(resultOf(bySlot(plan, 2)).roleWorldSize == 3);
  CHECK(resultOf(bySlot(plan, 5)).baseRoleRank == 0);
}

TEST_CASE("plan: node rank 0 watches everyone, the others their successor, with hosts",
          "[rendezvous]") {
  RoundMembership m;
  for (int i = 0; i < 5; ++i) m.members.push_back(member(i + 1, "h" + std::to_string(i), 1, "r"));
  const RoundPlan plan = planRound(m);
  const auto& zero = bySlot(plan, 1).member->watched;
  REQUIRE(zero.size() == 4);
  CHECK(zero[0].rank == 1);
  CHECK(zero[3].host == "h4");
  const auto& last = bySlot(plan, 5).member->watched;
  REQUIRE(last.size() == 1);
  CHECK(last[0].rank == 0);  // the successor of the last node is node rank 0
  CHECK(last[0].host == "h0");
  CHECK(watchedBy(0, 1).empty());
  // Every member's assignment but node rank 0's has the same small size, whatever N.
  CHECK(encodeAssignment(bySlot(plan, 3)).size() < 64);
}

TEST_CASE("assignment codec: odd strings round-trip, a header alone is no member, garbage throws",
          "[rendezvous]") {
  Assignment a;
  a.header = RoundHeader{7, 2, 4, 12, ""};
  a.member = Placement{1, 3, 0, 12, {{2, "tab\there%\nx"}}};
  const Assignment back = decodeAssignment(encodeAssignment(a));
  CHECK(back.header.generation == 7);
  CHECK(back.header.worldSize == 12);
  REQUIRE(back.member);
  CHECK(back.member->baseRank == 3);
  REQUIRE(back.member->watched.size() == 1);
  CHECK(back.member->watched[0].host == "tab\there%\nx");

  const Assignment late = decodeAssignment(encodeAssignment({a.header, std::nullopt}));
  CHECK_FALSE(late.member);
  CHECK(late.header.nodeCount == 4);
  CHECK_THROWS_AS(resultOf(late), Error);

  Assignment failed;
  failed.header.error = "nodes a and b both asked for node rank 1";
  CHECK_THROWS_WITH(resultOf(decodeAssignment(encodeAssignment(failed))),
                    Catch::Contains("both asked"));
  CHECK_THROWS_AS(decodeAssignment("garbage"), ProtocolError);
  CHECK_THROWS_AS(decodeAssignment("1\t0\t1\t1\t\nnot a placement\n"), ProtocolError);
}
