// HangWatch's decisions with times passed in (no sleeping): beats, activity, companions silent for
// half the timeout, the order of hung workers by events, torch's file timers.
#include "launcher/hang/hang_watch.hpp"

#include <catch2/catch.hpp>

namespace ddp {
namespace {

using namespace std::chrono_literals;
using Clock = HangWatch::Clock;

const Clock::time_point t0 = Clock::time_point{} + 1000s;
constexpr double kUnix0 = 1700000000.0;

std::vector<int> ranks(const HangCheck& c) {
  std::vector<int> out;
  for (const auto& h : c.hangs) out.push_back(h.localRank);
  return out;
}

}  // namespace

TEST_CASE("a worker without any progress hangs after the timeout, not before", "[hang]") {
  HangWatch w(3s, {100, 101}, t0);
  w.activity(1, t0 + 2s);
  CHECK(w.check(t0 + 2999ms, kUnix0).hangs.empty());
  auto due = w.check(t0 + 3s, kUnix0);
  REQUIRE(ranks(due) == std::vector<int>{0});  // rank 1 was silent 1 s < 1.5 s: not a companion
  CHECK(due.hangs[0].target == 100);
  CHECK(due.hangs[0].signal == 0);
  CHECK(due.hangs[0].reason.find("no output, CPU time or timer request for 3.0 s") != std::string::npos);
  CHECK(w.check(t0 + 4999ms, kUnix0).hangs.empty());  // rank 0 left the watch; rank 1 not yet
  CHECK(ranks(w.check(t0 + 5s, kUnix0)) == std::vector<int>{1});
}

TEST_CASE("beats make a worker beat-judged: activity no longer counts", "[hang]") {
  HangWatch w(2s, {100}, t0);
  w.beat(0, 7, t0 + 1s);
  CHECK_FALSE(w.needsSampling(0));
  w.activity(0, t0 + 2500ms);  // output or CPU: ignored once it beats
  auto due = w.check(t0 + 3s, kUnix0);
  REQUIRE(ranks(due) == std::vector<int>{0});
  CHECK(due.hangs[0].reason.find("no progress report for 2.0 s") != std::string::npos);
  CHECK(due.hangs[0].reason.find("step 7") != std::string::npos);
}

TEST_CASE("one hang takes every worker silent for half the timeout with it, in event order",
          "[hang]") {
  HangWatch w(4s, {100, 101, 102, 103}, t0);
  w.beat(2, 1, t0 + 1s);  // event 1: rank 2 went quiet first
  w.beat(1, 1, t0 + 1s);  // event 2
  w.beat(0, 1, t0 + 2s);  // event 3
  w.beat(3, 1, t0 + 4s);  // healthy: silent 1 s at the check
  auto due = w.check(t0 + 5s, kUnix0);
  CHECK(ranks(due) == std::vector<int>{2, 1, 0});  // rank 0 silent 3 s >= 2 s: taken with them
  // Hung workers leave the watch: no second verdict.
  CHECK(ranks(w.check(t0 + 20s, kUnix0)) == std::vector<int>{3});
}

TEST_CASE("a worker that never made progress comes first, then by local rank", "[hang]") {
  HangWatch w(2s, {100, 101, 102}, t0);
  w.activity(0, t0 + 100ms);
  CHECK(ranks(w.check(t0 + 2200ms, kUnix0)) == std::vector<int>{1, 2, 0});
}

TEST_CASE("an exited worker is not watched", "[hang]") {
  HangWatch w(1s, {100, 101}, t0);
  w.exited(0);
  CHECK_FALSE(w.needsSampling(0));
  CHECK(w.needsSampling(1));
  CHECK(ranks(w.check(t0 + 5s, kUnix0)) == std::vector<int>{1});
  CHECK_FALSE(w.nextDeadline(t0 + 5s, kUnix0));
}

TEST_CASE("without --hang-timeout only file timers decide", "[hang]") {
  HangWatch w(0ms, {100}, t0);
  CHECK_FALSE(w.needsSampling(0));
  CHECK_FALSE(w.nextDeadline(t0, kUnix0));
  CHECK(w.check(t0 + 1h, kUnix0 + 3600).hangs.empty());
  w.acquire(0, 555, "scope#1", kUnix0 + 2, 9);
  const auto next = w.nextDeadline(t0, kUnix0);
  REQUIRE(next);
  CHECK(*next - t0 == 2s);
  CHECK(w.check(t0, kUnix0 + 1.9).hangs.empty());
  auto due = w.check(t0, kUnix0 + 2);
  REQUIRE(due.hangs.size() == 1);
  CHECK(due.hangs[0].target == 555);  // the timer's process, as torch
  CHECK(due.hangs[0].signal == 9);
  CHECK(due.hangs[0].reason.find("file timer 'scope#1' of pid 555 expired") != std::string::npos);
}

TEST_CASE("a released timer never fires", "[hang]") {
  HangWatch w(0ms, {100}, t0);
  w.acquire(0, 100, "a", kUnix0 + 1, 9);
  w.release(0, 100, "a");
  CHECK(w.check(t0, kUnix0 + 10).hangs.empty());
  CHECK_FALSE(w.nextDeadline(t0, kUnix0));
}

TEST_CASE("torch's choice among expired timers: the earliest with a signal", "[hang]") {
  HangWatch w(0ms, {100, 200}, t0);
  w.acquire(0, 100, "no-signal", kUnix0 + 1, 0);
  w.acquire(0, 100, "late", kUnix0 + 3, 15);
  w.acquire(0, 100, "early", kUnix0 + 2, 9);
  w.acquire(1, 200, "other", kUnix0 + 1.5, 9);
  auto due = w.check(t0, kUnix0 + 5);
  REQUIRE(due.hangs.size() == 2);
  CHECK(due.hangs[0].localRank == 1);  // its deadline came first
  CHECK(due.hangs[1].localRank == 0);
  CHECK(due.hangs[1].reason.find("'early'") != std::string::npos);
  CHECK(due.hangs[1].signal == 9);
  REQUIRE(due.notes.size() == 1);  // the timer without a signal is only noted
  CHECK(due.notes[0].find("'no-signal'") != std::string::npos);
}

TEST_CASE("the next deadline is the nearest of progress and timers", "[hang]") {
  HangWatch w(10s, {100}, t0);
  CHECK(*w.nextDeadline(t0, kUnix0) == t0 + 10s);
  w.beat(0, 1, t0 + 5s);
  CHECK(*w.nextDeadline(t0 + 5s, kUnix0 + 5) == t0 + 15s);
  w.acquire(0, 100, "x", kUnix0 + 8, 9);
  CHECK(*w.nextDeadline(t0 + 5s, kUnix0 + 5) == t0 + 8s);
}

}  // namespace ddp
