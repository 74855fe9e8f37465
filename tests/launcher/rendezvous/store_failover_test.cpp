// Store failover, the launcher side (store_failover.hpp): who succeeds a lost store host, how
// long survivors wait for it, and the handover of the survivors' state in the new store
// (store_failover_exchange.hpp), over an in-process store.
#include <catch2/catch.hpp>

#include <future>

#include "launcher/rendezvous/store_failover.hpp"
#include "launcher/rendezvous/store_failover_exchange.hpp"
#include "rendezvous/base/error.hpp"
#include "rendezvous/store/in_memory_store.hpp"

using namespace ddp;
using namespace std::chrono_literals;

namespace {

Standby standby(int rank, const std::string& host, int pid) {
  return Standby{rank, AgentId{host, pid}, "10.0.0." + std::to_string(rank + 1)};
}

std::vector<int> ranks(const std::vector<Standby>& standbys) {
  std::vector<int> out;
  for (const auto& s : standbys) out.push_back(s.nodeRank);
  return out;
}

JobSnapshot snap(int64_t gen, int restarts, std::vector<std::string> failures) {
  JobSnapshot s;
  s.runId = "job";
  s.incarnation = 0;
  s.generation = gen;
  s.restartsUsed = restarts;
  s.failureRecords = std::move(failures);
  return s;
}

}  // namespace

TEST_CASE("the succession order: the standby list by node rank, the dead host left out",
          "[store_failover]") {
  const std::vector<Standby> members = {standby(2, "n3", 30), standby(0, "n1", 10),
                                        standby(3, "n4", 40), standby(1, "n2", 20)};
  CHECK(ranks(successionOrder(members, AgentId{"n1", 10})) == std::vector<int>{1, 2, 3});
  // The host need not be node rank 0 (the first agent to start hosts it).
  CHECK(ranks(successionOrder(members, AgentId{"n3", 30})) == std::vector<int>{0, 1, 3});
  // Same host name, other pid (several agents on one machine): not the dead one.
  CHECK(ranks(successionOrder(members, AgentId{"n1", 11})) == std::vector<int>{0, 1, 2, 3});
  CHECK(ranks(successionOrder(members, std::nullopt)) == std::vector<int>{0, 1, 2, 3});
  CHECK(successionOrder({}, AgentId{"n1", 10}).empty());
}

TEST_CASE("standby entries round-trip; malformed ones are refused", "[store_failover]") {
  NodeDescriptor self;
  self.host = "n2";
  self.pid = 77;
  self.addr = "fd00::2";
  CHECK(decodeStandby(1, encodeStandby(self)) == Standby{1, AgentId{"n2", 77}, "fd00::2"});
  for (const char* bad : {"", "n2|77|", "n2|x|10.0.0.1", "n2|10.0.0.1", "|77|10.0.0.1"}) {
    INFO(bad);
    CHECK_FALSE(decodeStandby(0, bad));
  }
}

TEST_CASE("agent ids and the failover bound", "[store_failover]") {
  CHECK(parseAgentId("n1|42") == AgentId{"n1", 42});
  CHECK(parseAgentId("odd|name|7") == AgentId{"odd|name", 7});
  for (const char* bad : {"n1", "n1|", "|5", "n1|0", "n1|x", "n1|5x"}) {
    INFO(bad);
    CHECK_FALSE(parseAgentId(bad));
  }
  RendezvousSettings s;
  s.keepAliveInterval = 500ms;
  s.heartbeatTimeout = 3s;
  CHECK(failoverBound(s) == 6500ms);
  s.heartbeatTimeout = 0ms;
  s.keepAliveMaxAttempt = 3;
  CHECK(failoverBound(s) == 3500ms);  // 2 x (0.5 s x 3) + 0.5 s
}

TEST_CASE("the new host merges the survivors' reports before anybody joins", "[store_failover]") {
  InMemoryStore store;
  auto h1 = store.newHandle();
  auto h2 = store.newHandle();
  // The new host knew generation 4; one survivor saw generation 5 form (and the restart and
  // record before it), another is behind.
  auto host = std::async(std::launch::async, [&] {
    return seedFromReports(store, snap(4, 1, {"r1"}), 2, 20s);
  });
  auto ahead = std::async(std::launch::async, [&] {
    reportToNewHost(*h1, snap(5, 2, {"r1", "r2"}), 2, 20s);
  });
  auto behind = std::async(std::launch::async, [&] {
    reportToNewHost(*h2, snap(3, 0, {}), 2, 20s);
  });
  const JobSnapshot merged = host.get();
  ahead.get();  // released only once the store is seeded (a TimeoutError otherwise)
  behind.get();
  CHECK(merged.generation == 5);
  CHECK(merged.restartsUsed == 2);
  CHECK(merged.failureRecords == std::vector<std::string>{"r1", "r2"});
  CHECK(store.get("rdzv/job/inc") == "0");
  CHECK(store.get("rdzv/job/0/round") == "6");
  CHECK(store.get("rdzv/job/0/restarts") == "2");
}

TEST_CASE("a survivor that never reports is not waited for past the bound; a new host that "
          "never seeds fails the survivor", "[store_failover]") {
  InMemoryStore store;
  const JobSnapshot merged = seedFromReports(store, snap(4, 1, {}), 1, 200ms);
  CHECK(merged.generation == 4);
  CHECK(store.get("rdzv/job/0/round") == "5");
  InMemoryStore unseeded;
  CHECK_THROWS_AS(reportToNewHost(unseeded, snap(4, 1, {}), 1, 200ms), TimeoutError);
}

TEST_CASE("the standby list travels through the round's records", "[store_failover]") {
  InMemoryStore store;
  RendezvousSettings settings;
  settings.runId = "job";
  settings.minNodes = settings.maxNodes = 2;
  settings.keepAliveInterval = 100ms;
  settings.heartbeatTimeout = 3s;
  NodeDescriptor a;
  a.host = "na";
  a.pid = 11;
  a.addr = "10.0.0.1";
  NodeDescriptor b = a;
  b.host = "nb";
  b.pid = 22;
  b.addr = "10.0.0.2";
  auto ra = makeRendezvous(store, settings, a);
  auto rb = makeRendezvous(store, settings, b);
  auto fa = std::async(std::launch::async, [&] { return ra->next(); });
  auto fb = std::async(std::launch::async, [&] { return rb->next(); });
  const auto roundA = std::get<RendezvousResult>(fa.get());
  const auto roundB = std::get<RendezvousResult>(fb.get());
  publishStandby(*ra, roundA, a);
  publishStandby(*rb, roundB, b);
  auto got = readStandbys(*ra, roundA, 5s);
  REQUIRE(std::holds_alternative<std::vector<Standby>>(got));
  const auto list = std::get<std::vector<Standby>>(got);
  REQUIRE(list.size() == 2);
  const Standby& first = list[0].agent.host == "na" ? list[0] : list[1];
  CHECK(first.nodeRank == roundA.nodeRank);
  CHECK(first.addr == "10.0.0.1");
  // With node a's agent hosting the store and gone, node b is the successor.
  const auto order = successionOrder(list, AgentId{"na", 11});
  REQUIRE(order.size() == 1);
  CHECK(order[0].agent == AgentId{"nb", 22});
  ra->leave();
  rb->leave();
}
