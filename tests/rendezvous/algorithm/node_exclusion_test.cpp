// Bad-node exclusion in the rendezvous (ExclusionBoard::claim, sitOut, markReturned;
// rendezvous/algorithm/detail/node_exclusion.hpp): the claim rule that never drops a job below
// min_nodes, spares counted, the job's bounded list, and a node that sits out and comes back.
#include <catch2/catch.hpp>

#include "rendezvous/algorithm/detail/node_exclusion.hpp"
#include "rendezvous/store/in_memory_store.hpp"
#include "tests/rendezvous/rendezvous_harness.hpp"

using namespace ddp;
using namespace ddp::test;

namespace {

NodeExclusion exclusionOf(const std::string& host, int pid, int64_t g) {
  NodeExclusion e;
  e.host = host;
  e.pid = pid;
  e.generation = g;
  e.why = "2 failure(s) of this node's workers within 600 s";
  e.cooldownMs = 50;
  e.unixMs = 1;
  return e;
}

}  // namespace

TEST_CASE("exclusion: granted while the round keeps min_nodes, refused below it",
          "[rendezvous][exclusion]") {
  InMemoryStore store;
  const detail::RendezvousKeys keys("claims", 0);
  // 3 nodes, min_nodes 2: one may leave, a second may not (the counter is shared).
  CHECK(detail::claimExclusion(store, keys, 4, 3, 2, exclusionOf("a", 1, 4)).granted);
  const ExclusionClaim second = detail::claimExclusion(store, keys, 4, 3, 2, exclusionOf("b", 2, 4));
  CHECK_FALSE(second.granted);
  CHECK(second.members == 3);
  CHECK(second.leaving == 2);
  CHECK(second.spares == 0);
  // The refused claim took its count back: a spare that waited lets the next one leave.
  store.add(keys.spares(4), 1);
  const ExclusionClaim withSpare = detail::claimExclusion(store, keys, 4, 3, 2, exclusionOf("b", 2, 4));
  CHECK(withSpare.granted);
  CHECK(withSpare.leaving == 2);
  CHECK(withSpare.spares == 1);
  // A fixed-size job (min = max = members) without a spare never grants one.
  CHECK_FALSE(detail::claimExclusion(store, keys, 5, 2, 2, exclusionOf("c", 3, 5)).granted);
  const auto list = detail::decodeExclusions(store.get(keys.exclusions()));
  REQUIRE(list.size() == 2);
  CHECK(list[0].host == "a");
  CHECK(list[1].host == "b");
  CHECK(store.add(keys.exclusionCount(), 0) == 2);
}

TEST_CASE("exclusion: the job keeps the newest 32, counts all, marks the newest one returned",
          "[rendezvous][exclusion]") {
  InMemoryStore store;
  const detail::RendezvousKeys keys("list", 0);
  for (int i = 0; i < 40; ++i) {
    REQUIRE(detail::claimExclusion(store, keys, i, 100, 1, exclusionOf("h", i % 3, i)).granted);
  }
  auto list = detail::decodeExclusions(store.get(keys.exclusions()));
  REQUIRE(list.size() == kMaxExclusionsKept);
  CHECK(list.front().generation == 8);
  CHECK(list.back().generation == 39);
  CHECK(store.add(keys.exclusionCount(), 0) == 40);
  detail::markExclusionReturned(store, keys, "h", 0, 41);  // pid 0's newest: generation 39
  detail::markExclusionReturned(store, keys, "h", 0, 42);  // already back: nothing changes
  list = detail::decodeExclusions(store.get(keys.exclusions()));
  CHECK(list.back().returnedAt == 41);
  CHECK(list[list.size() - 2].returnedAt == -1);
  // A line this version cannot read is skipped, the others kept.
  CHECK(detail::decodeExclusions("{\"host\":1}\nnot json\n" + detail::encodeExclusion(list[0]) +
                                 "\n").size() == 1);
}

TEST_CASE("exclusion: a node sits out, the others' round ends, it joins again as a newcomer",
          "[rendezvous][exclusion]") {
  InMemoryStore store;
  Agent a(store, fastSettings("sit", 1, 2), node("alpha"));
  Agent b(store, fastSettings("sit", 1, 2), node("beta"));
  const auto first = joinAll({&a, &b});
  const int64_t g = first[0].generation;
  a.watch();
  REQUIRE(b.rdzv->exclusions().claim(exclusionOf("beta", node("beta").pid, g)).granted);
  CHECK_FALSE(b.rdzv->exclusions().sitOut(std::chrono::milliseconds(50)));  // the cooldown passed
  const auto lost = a.events.waitFor(std::chrono::seconds(10));
  REQUIRE(lost);
  CHECK(lost->kind == RendezvousEventKind::kPeerLost);
  CHECK_THAT(lost->detail, Catch::Contains("left the job for a cooldown"));
  // a goes on alone; b comes back and the round after is both again.
  const RendezvousResult alone = joined(a.rdzv->next());
  CHECK(alone.nodeCount == 1);
  a.watch();
  const auto back = joinAll({&b, &a});
  CHECK(back[0].nodeCount == 2);
  b.rdzv->exclusions().markReturned(back[0].generation);
  const auto list = b.rdzv->exclusions().list();
  REQUIRE(list.size() == 1);
  CHECK(list[0].returnedAt == back[0].generation);
  CHECK(b.rdzv->exclusions().count() == 1);
}
