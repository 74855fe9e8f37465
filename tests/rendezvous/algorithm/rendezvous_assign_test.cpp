// The pure parts of the rendezvous: node-rank rule, roster codec, round-end and failure-record
// encodings.
#include <catch2/catch.hpp>

#include "rendezvous/algorithm/detail/rendezvous_assign.hpp"
#include "rendezvous/algorithm/detail/rendezvous_keys.hpp"

using namespace ddp;
using namespace ddp::detail;

namespace {

JoinRecord record(int64_t slot, const std::string& host, int prevRank = -1, int requested = -1,
                  int lws = 1, const std::string& role = "default") {
  JoinRecord r;
  r.slot = slot;
  r.prevRank = prevRank;
  r.node.host = host;
  r.node.addr = "10.1.0." + std::to_string(slot);
  r.node.pid = static_cast<int>(100 + slot);
  r.node.localWorldSize = lws;
  r.node.requestedRank = requested;
  r.node.role = role;
  return r;
}

std::vector<std::string> hosts(const std::vector<JoinRecord>& ordered) {
  std::vector<std::string> out;
  for (const auto& r : ordered) out.push_back(r.node.host);
  return out;
}

}  // namespace

TEST_CASE("node ranks: requested first, then previous rank, then (host, addr, pid)",
          "[rendezvous]") {
  // A fresh job: host order, whatever the join order.
  CHECK(hosts(assignNodeRanks({record(1, "c"), record(2, "a"), record(3, "b")}, 0)) ==
        std::vector<std::string>{"a", "b", "c"});
  // Returning nodes keep their order; a newcomer goes after them even if its name sorts first.
  CHECK(hosts(assignNodeRanks({record(1, "z", 1), record(2, "a"), record(3, "y", 0)}, 1)) ==
        std::vector<std::string>{"y", "z", "a"});
  // Requested ranks win; the rest fill the free ranks.
  CHECK(hosts(assignNodeRanks({record(1, "a"), record(2, "b", -1, 0), record(3, "c", 0, 2)}, 0)) ==
        std::vector<std::string>{"b", "a", "c"});
  // Same host, several agents: addr then pid break the tie.
  auto sameHost = assignNodeRanks({record(2, "h"), record(1, "h")}, 0);
  CHECK(sameHost[0].slot == 1);
  CHECK_THROWS_AS(assignNodeRanks({record(1, "a", -1, 0), record(2, "b", -1, 0)}, 0), ConfigError);
  CHECK_THROWS_WITH(assignNodeRanks({record(1, "a", -1, 2)}, 4),
                    Catch::Contains("round 4 has 1 nodes"));
}

TEST_CASE("membership codec round-trips odd strings and rejects garbage", "[rendezvous]") {
  RoundMembership m;
  m.generation = 7;
  m.restartsUsed = 2;
  m.members = {record(1, "tab\there", 0, -1, 3, "role%with\nnewline"), record(2, "plain")};
  const RoundMembership back = decodeMembership(encodeMembership(m));
  CHECK(back.generation == 7);
  CHECK(back.restartsUsed == 2);
  REQUIRE(back.members.size() == 2);
  CHECK(back.members[0].node.host == "tab\there");
  CHECK(back.members[0].node.role == "role%with\nnewline");
  CHECK(back.members[0].node.localWorldSize == 3);
  CHECK(back.members[1].node.addr == "10.1.0.2");
  CHECK(decodeJoinRecord(encodeJoinRecord(m.members[0])).node.host == "tab\there");

  CHECK_THROWS_AS(decodeMembership("garbage"), ProtocolError);
  CHECK_THROWS_AS(decodeMembership("1\t0\t\nnot a record\n"), ProtocolError);
  CHECK_THROWS_AS(decodeJoinRecord("1\tx\t3\t4\t5\th\ta\tr"), ProtocolError);
}

TEST_CASE("join records carry the node's interface addresses, at most kMaxInterfaceAddrs", "[rendezvous]") {
  JoinRecord r = record(1, "multi-nic");
  r.node.interfaceAddrs = {"10.31.2.2", "10.31.3.2", "fd00::7"};
  const JoinRecord back = decodeJoinRecord(encodeJoinRecord(r));
  CHECK(back.node.interfaceAddrs == r.node.interfaceAddrs);
  CHECK(back.node.addr == r.node.addr);
  for (int i = 0; i < 40; ++i) r.node.interfaceAddrs.push_back("10.0.0." + std::to_string(i));
  CHECK(decodeJoinRecord(encodeJoinRecord(r)).node.interfaceAddrs.size() == kMaxInterfaceAddrs);
  r.node.interfaceAddrs.clear();
  CHECK(decodeJoinRecord(encodeJoinRecord(r)).node.interfaceAddrs.empty());
  // A record without the field (ten fields) still reads.
  const std::string old = "1\t-1\t-1\t4\t1\t-1\t-1\thost\t10.0.0.9\tdefault";
  CHECK(decodeJoinRecord(old).node.addr == "10.0.0.9");
  CHECK(decodeJoinRecord(old).node.interfaceAddrs.empty());
}

TEST_CASE("round ends and failure records", "[rendezvous]") {
  const RoundEnd end = decodeRoundEnd(encodeRoundEnd({RendezvousEventKind::kScaleUp, "a|b"}));
  CHECK(end.kind == RendezvousEventKind::kScaleUp);
  CHECK(end.detail == "a|b");
  CHECK(decodeRoundEnd("somethingnew|x").kind == RendezvousEventKind::kPeerLost);
  // A verdict's end (issue 22 item 2) round-trips; a plain job failure is none.
  RoundEnd verdict{RendezvousEventKind::kJobFailed, "the same failure in 3 generations"};
  verdict.verdict = true;
  const RoundEnd back = decodeRoundEnd(encodeRoundEnd(verdict));
  CHECK(back.kind == RendezvousEventKind::kJobFailed);
  CHECK(back.verdict);
  CHECK(back.detail == verdict.detail);
  CHECK_FALSE(decodeRoundEnd(encodeRoundEnd({RendezvousEventKind::kJobFailed, "x"})).verdict);
  JobEnd job = jobEndNow(false, 4, "the same failure | twice");
  job.verdict = true;
  const JobEnd jobBack = decodeJobEnd(encodeJobEnd(job));
  CHECK(jobBack.verdict);
  CHECK_FALSE(jobBack.succeeded);
  CHECK(jobBack.generation == 4);
  CHECK(jobBack.reason == "the same failure | twice");
  CHECK_FALSE(decodeJobEnd(encodeJobEnd(jobEndNow(false, 1, "budget"))).verdict);

  const std::string framed = frameRecord("{\"a\":1}") + frameRecord("") + frameRecord("x\ny");
  CHECK(unframeRecords(framed) == std::vector<std::string>{"{\"a\":1}", "", "x\ny"});
  CHECK(unframeRecords("").empty());
  CHECK_THROWS_AS(unframeRecords("5\nab"), ProtocolError);
  CHECK_THROWS_AS(unframeRecords("zz\nab"), ProtocolError);
  CHECK_THROWS_AS(parseCount("k", "12x"), ProtocolError);
}
