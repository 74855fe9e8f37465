// Store failover, the rendezvous side: what an agent knows of its job (Rendezvous::snapshot()),
// merging what several agents know, and a fresh store seeded with it carrying the job on at the
// next generation with its restart count and failure records (job_snapshot.hpp).
#include <catch2/catch.hpp>

#include <future>

#include "rendezvous/algorithm/job_snapshot.hpp"
#include "rendezvous/base/error.hpp"
#include "rendezvous/store/in_memory_store.hpp"
#include "tests/rendezvous/rendezvous_harness.hpp"

using namespace ddp;
using namespace ddp::test;

namespace {

JobSnapshot snap(int64_t inc, int64_t gen, int restarts, std::vector<std::string> failures) {
  JobSnapshot s;
  s.runId = "job";
  s.incarnation = inc;
  s.generation = gen;
  s.restartsUsed = restarts;
  s.failureRecords = std::move(failures);
  return s;
}

void seed(Store& store, const JobSnapshot& s) {
  for (const auto& [key, value] : seedKeys(s)) store.set(key, value);
}

}  // namespace

TEST_CASE("merging snapshots keeps the highest generation and restarts and every record",
          "[job_snapshot]") {
  JobSnapshot a = snap(2, 4, 1, {"r1"});
  JobSnapshot b = snap(2, 5, 2, {"r1", "r2"});
  const JobSnapshot m = mergeSnapshots(a, b);
  CHECK(m.generation == 5);
  CHECK(m.restartsUsed == 2);
  CHECK(m.failureRecords == std::vector<std::string>{"r1", "r2"});
  // Restarts and records merge even when the generation does not move.
  const JobSnapshot n = mergeSnapshots(snap(2, 5, 0, {"r3"}), snap(2, 3, 2, {"r1"}));
  CHECK(n.generation == 5);
  CHECK(n.restartsUsed == 2);
  CHECK(n.failureRecords == std::vector<std::string>{"r3", "r1"});
  // A newer incarnation wins whole; another run id or no incarnation adds nothing.
  CHECK(mergeSnapshots(snap(2, 9, 3, {"x"}), snap(3, 0, 0, {})).incarnation == 3);
  JobSnapshot other = snap(2, 9, 5, {"y"});
  other.runId = "other";
  CHECK(mergeSnapshots(a, other).generation == 4);
  CHECK(mergeSnapshots(a, JobSnapshot{}).generation == 4);
  CHECK(mergeSnapshots(JobSnapshot{}, a).generation == 4);
}

TEST_CASE("a snapshot's report round-trips and a malformed one is refused", "[job_snapshot]") {
  JobSnapshot s = snap(1, 7, 2, {"{\"a\":1}", "line\nbreak"});
  s.runId = "run with space";
  const JobSnapshot back = decodeSnapshot(encodeSnapshot(s));
  CHECK(back.runId == s.runId);
  CHECK(back.incarnation == 1);
  CHECK(back.generation == 7);
  CHECK(back.restartsUsed == 2);
  CHECK(back.failureRecords == s.failureRecords);
  CHECK_THROWS_AS(decodeSnapshot("nonsense"), ProtocolError);
  CHECK_THROWS_AS(decodeSnapshot("1 2 3 99\nshort"), ProtocolError);
  CHECK(seedKeys(JobSnapshot{}).empty());  // attached to no incarnation: nothing to seed
}

TEST_CASE("a job moves to a fresh store seeded from its agents' snapshots", "[job_snapshot]") {
  InMemoryStore lost;
  RendezvousSettings settings = fastSettings("job", 2, 2);
  settings.maxRestarts = 3;
  Agent a(lost, settings, node("a"));
  Agent b(lost, settings, node("b"));
  CHECK(a.rdzv->snapshot().incarnation == -1);
  checkConsistent(joinAll({&a, &b}));
  // Node a's workers fail: one restart spent, generation 1.
  const RendezvousEvent reported = a.rdzv->failures().reportFailure("{\"node\":\"a\"}");
  REQUIRE(reported.kind == RendezvousEventKind::kRestartRequested);
  const auto gen1 = joinAll({&a, &b});
  checkConsistent(gen1);
  REQUIRE(gen1[0].generation == 1);

  const JobSnapshot sa = a.rdzv->snapshot();
  const JobSnapshot sb = b.rdzv->snapshot();
  CHECK(sb.incarnation == 0);
  CHECK(sb.generation == 1);
  CHECK(sb.restartsUsed == 1);
  CHECK(sb.failureRecords == std::vector<std::string>{"{\"node\":\"a\"}"});  // read as gen 1 formed

  // The store is lost; the survivors carry on in a fresh one seeded with what they knew.
  InMemoryStore fresh;
  seed(fresh, mergeSnapshots(sa, sb));
  Agent a2(fresh, settings, node("a"));
  Agent b2(fresh, settings, node("b"));
  const auto moved = joinAll({&a2, &b2});
  checkConsistent(moved);
  CHECK(moved[0].generation == 2);    // continues from the highest generation known
  CHECK(moved[0].restartsUsed == 1);  // the move spent nothing
  CHECK(a2.rdzv->failures().failureRecords() == sb.failureRecords);
  // The restart budget goes on from where it stood: two more, then the job fails.
  CHECK(a2.rdzv->failures().reportFailure("{\"again\":1}").kind ==
        RendezvousEventKind::kRestartRequested);
  CHECK(joinAll({&a2, &b2})[0].restartsUsed == 2);
}
