// A node's straggler watch (launcher/straggler/straggler_watch.hpp): figures are the median of a
// rank's beats in the window, verdicts and log lines per local rank, a new generation or a
// replaced rank starts afresh. Times are passed in: nothing sleeps.
#include "launcher/straggler/straggler_watch.hpp"

#include <catch2/catch.hpp>

namespace ddp {

using namespace std::chrono_literals;

TEST_CASE("a rank's figure is the median of its beats in the window", "[straggler]") {
  StragglerWatch watch(StragglerRule{1.5, 10s});
  const auto t0 = std::chrono::steady_clock::time_point{} + 1h;
  watch.startGeneration(2);
  watch.beat(0, 0.005, t0);
  watch.beat(0, 0.500, t0 + 1s);  // one slow beat (a pause) does not make the figure
  watch.beat(0, 0.006, t0 + 2s);
  watch.beat(7, 1.0, t0);         // no such local rank: ignored
  auto f = watch.figures(t0 + 2s);
  REQUIRE(f.size() == 2);
  REQUIRE(f[0]);
  CHECK(*f[0] == 0.006);
  CHECK_FALSE(f[1]);  // no beat yet
  // 11 s later the first two are out of the window.
  f = watch.figures(t0 + 11500ms);
  REQUIRE(f[0]);
  CHECK(*f[0] == 0.006);
  f = watch.figures(t0 + 13s);
  CHECK_FALSE(f[0]);
}

TEST_CASE("verdicts per local rank, with a line for each change", "[straggler]") {
  StragglerWatch watch(StragglerRule{2.0, 3s});
  const auto t0 = std::chrono::steady_clock::time_point{} + 1h;
  watch.startGeneration(2);
  const std::vector<int> ranks{4, 5};  // this node's global ranks
  const std::vector<std::optional<double>> slowOne{0.005, 0.050};
  auto j = watch.judge(slowOne, 0.005, ranks, t0);
  CHECK(j.flagged == std::vector<bool>{false, false});
  CHECK(j.lines.empty());
  j = watch.judge(slowOne, 0.005, ranks, t0 + 3s);
  CHECK(j.flagged == std::vector<bool>{false, true});
  REQUIRE(j.lines.size() == 1);
  CHECK(j.lineIsFlag == std::vector<bool>{true});
  CHECK(j.lines[0] == "rank 5 is a straggler: compute 50.0 ms/step vs job median 5.0 ms (x10.00) for 3 s");
  // Replaced in place (or exited): its verdict starts afresh (the new process has not beaten yet).
  watch.forget(1);
  j = watch.judge({0.005, std::nullopt}, 0.005, ranks, t0 + 4s);
  CHECK(j.flagged == std::vector<bool>{false, false});
  CHECK(j.lines.empty());
  // Flag it again, then let it recover.
  watch.judge(slowOne, 0.005, ranks, t0 + 5s);
  j = watch.judge(slowOne, 0.005, ranks, t0 + 8s);
  CHECK(j.flagged[1]);
  j = watch.judge({0.005, 0.006}, 0.005, ranks, t0 + 9s);
  CHECK(j.flagged == std::vector<bool>{false, false});
  REQUIRE(j.lines.size() == 1);
  CHECK(j.lineIsFlag == std::vector<bool>{false});
  CHECK(j.lines[0] == "rank 5 is no longer a straggler: compute 6.0 ms/step vs job median 5.0 ms (x1.20)");
  // A new generation: every rank afresh.
  watch.judge(slowOne, 0.005, ranks, t0 + 10s);
  watch.startGeneration(3);
  j = watch.judge({0.05, 0.05, 0.05}, 0.005, {0, 1, 2}, t0 + 14s);
  CHECK(j.flagged == std::vector<bool>{false, false, false});
}

TEST_CASE("a rank's beats are bounded", "[straggler]") {
  StragglerWatch watch(StragglerRule{1.5, 3600s});
  const auto t0 = std::chrono::steady_clock::time_point{} + 1h;
  watch.startGeneration(1);
  // kMaxBeats slow ones, then kMaxBeats fast ones: only the fast ones are kept.
  for (std::size_t i = 0; i < StragglerWatch::kMaxBeats; ++i) watch.beat(0, 1.0, t0);
  for (std::size_t i = 0; i < StragglerWatch::kMaxBeats; ++i) watch.beat(0, 0.001, t0);
  const auto f = watch.figures(t0);
  REQUIRE(f[0]);
  CHECK(*f[0] == 0.001);
}

}  // namespace ddp
