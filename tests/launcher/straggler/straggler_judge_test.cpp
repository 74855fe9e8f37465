// The straggler rule (launcher/straggler/straggler_judge.hpp): the median, one rank's judgement
// walked through a table of judgements on a steady clock the test moves, and the log lines.
#include "launcher/straggler/straggler_judge.hpp"

#include <catch2/catch.hpp>

namespace ddp {

using namespace std::chrono_literals;

TEST_CASE("the median of every rank's figure", "[straggler]") {
  CHECK_FALSE(medianOf({}));
  CHECK(medianOf({7}) == 7);
  CHECK(medianOf({3, 1, 2}) == 2);
  CHECK(medianOf({4, 1, 3, 2}) == 2);  // even: the lower middle one
  CHECK(medianOf({0.06, 0.0003}) == 0.0003);  // two ranks, one slow: judged against the fast one
  CHECK(medianOf({5, 5, 5, 50}) == 5);   // one slow rank does not move it
  CHECK(medianOf({0.006, 0.060, 0.006, 0.0061, 0.0059}) == 0.006);
}

TEST_CASE("a rank over the threshold at every judgement for the window is flagged", "[straggler]") {
  const StragglerRule rule{1.5, 10s};
  const auto t0 = std::chrono::steady_clock::time_point{} + 1h;
  struct Row {
    int atS;                        // seconds after t0
    std::optional<double> compute;  // the rank's figure
    std::optional<double> median;   // the job's
    StragglerChange change;
    bool flaggedAfter;
  };
  using C = StragglerChange;
  const std::optional<double> none;
  const std::vector<Row> rows = {
      {0, 0.005, 0.005, C::kNone, false},      // at the median
      {1, 0.012, 0.006, C::kNone, false},      // over (x2): the window starts
      {6, 0.012, 0.006, C::kNone, false},      // 5 s over
      {10, 0.012, none, C::kNone, false},      // no median: nothing changes
      {10, none, 0.006, C::kNone, false},      // no figure: nothing changes
      {11, 0.012, 0.006, C::kFlagged, true},  // 10 s over: flagged
      {12, 0.012, 0.006, C::kNone, true},      // flagged once
      {13, 0.009, 0.006, C::kRecovered, false},  // x1.5 exactly is not over: recovered
      {14, 0.0091, 0.006, C::kNone, false},    // over again: a new window, not flagged at once
      {23, 0.0091, 0.006, C::kNone, false},    // 9 s over
      {24, 0.0091, 0.006, C::kFlagged, true},  // 10 s
  };
  StragglerState state;
  for (std::size_t i = 0; i < rows.size(); ++i) {
    const Row& r = rows[i];
    INFO("row " << i << " at " << r.atS << " s");
    CHECK(judgeRank(state, r.compute, r.median, rule, t0 + std::chrono::seconds(r.atS)) == r.change);
    CHECK(state.flagged == r.flaggedAfter);
  }
}

TEST_CASE("one judgement under the threshold restarts the window", "[straggler]") {
  const StragglerRule rule{2.0, 5s};
  const auto t0 = std::chrono::steady_clock::time_point{} + 1h;
  StragglerState s;
  CHECK(judgeRank(s, 0.03, 0.01, rule, t0) == StragglerChange::kNone);
  CHECK(judgeRank(s, 0.03, 0.01, rule, t0 + 4s) == StragglerChange::kNone);
  CHECK(judgeRank(s, 0.019, 0.01, rule, t0 + 4500ms) == StragglerChange::kNone);  // under x2
  CHECK(judgeRank(s, 0.03, 0.01, rule, t0 + 5s) == StragglerChange::kNone);       // window anew
  CHECK(judgeRank(s, 0.03, 0.01, rule, t0 + 9s) == StragglerChange::kNone);
  CHECK(judgeRank(s, 0.03, 0.01, rule, t0 + 10s) == StragglerChange::kFlagged);
  CHECK(s.flagged);
  CHECK(judgeRank(s, 0.01, 0.01, rule, t0 + 11s) == StragglerChange::kRecovered);
  CHECK_FALSE(s.flagged);
  // A median of 0 (ranks that do no work) judges nobody.
  CHECK(judgeRank(s, 0.01, 0.0, rule, t0 + 12s) == StragglerChange::kNone);
  CHECK_FALSE(s.overSince);
}

TEST_CASE("the agent's log lines", "[straggler]") {
  CHECK(stragglerLine(3, 0.0121, 0.0059, 10s) ==
        "rank 3 is a straggler: compute 12.1 ms/step vs job median 5.9 ms (x2.05) for 10 s");
  CHECK(recoveredLine(3, 0.0060, 0.0059) ==
        "rank 3 is no longer a straggler: compute 6.0 ms/step vs job median 5.9 ms (x1.02)");
}

}  // namespace ddp
