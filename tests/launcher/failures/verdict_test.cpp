// The verdict (launcher/failures/verdict.hpp): which runs of failed generations stop the job, and
// which never do (communication failures, signals from outside, a generation without records).
#include <catch2/catch.hpp>

#include <csignal>
#include <optional>
#include <string>
#include <vector>

#include "launcher/failures/verdict.hpp"

using namespace ddp;

namespace {

WorkerFailure failure(int rank, int exitCode, std::string message, int64_t step) {
  WorkerFailure f;
  f.rank = rank;
  f.localRank = rank;
  f.host = "n1";
  f.exitCode = exitCode;
  f.message = std::move(message);
  f.step = step;
  f.failureSeq = 1;
  f.seqByWorker = true;
  return f;
}

FailureRecord record(int64_t generation, std::vector<WorkerFailure> failures, int node = 0) {
  return FailureRecord{generation, node, "n" + std::to_string(node + 1), std::move(failures)};
}

// Generations 0..n-1, each failing with `f`.
std::vector<FailureRecord> repeated(int n, const WorkerFailure& f) {
  std::vector<FailureRecord> out;
  for (int g = 0; g < n; ++g) out.push_back(record(g, {f}));
  return out;
}

const std::string kInjected = "ddp::Error: injected failure: rank 1 stops at step 3";

}  // namespace

TEST_CASE("verdict: the same failure in N generations in a row", "[restart_policy][verdict]") {
  const auto crash = failure(1, 1, kInjected, 3);
  const auto records = repeated(3, crash);
  const auto verdict = judgeGenerations(records, 2, 3);
  REQUIRE(verdict);
  CHECK(*verdict == "the same failure in 3 generations in a row: rank 1 exit 1 '" + kInjected +
                        "' at step 3; stopping instead of restarting");
  // One generation short of N, N = 0 (off), or a larger N: nothing.
  CHECK_FALSE(judgeGenerations(records, 1, 3));
  CHECK_FALSE(judgeGenerations(records, 2, 0));
  CHECK_FALSE(judgeGenerations(records, 2, 4));
  CHECK(judgeGenerations(records, 2, 2));
  const auto once = judgeGenerations(repeated(1, crash), 0, 1);
  REQUIRE(once);
  CHECK(once->rfind("the same failure in the last generation: rank 1 exit 1", 0) == 0);
  // A worker that reports no step (a PyTorch script, a shell): compared without one.
  const auto script = failure(0, 7, "", -1);
  const auto scripted = judgeGenerations(repeated(3, script), 2, 3);
  REQUIRE(scripted);
  CHECK(*scripted == "the same failure in 3 generations in a row: rank 0 exit 7; stopping instead "
                     "of restarting");
}

TEST_CASE("verdict: failures that differ do not repeat", "[restart_policy][verdict]") {
  const auto crash = failure(1, 1, kInjected, 3);
  for (int what = 0; what < 4; ++what) {
    auto other = crash;
    if (what == 0) other.rank = 2;
    if (what == 1) other.exitCode = 2;
    if (what == 2) other.message = "ddp::Error: something else";
    if (what == 3) other.step = 7;  // progress: step 7 is further than step 3
    std::vector<FailureRecord> records = {record(0, {crash}), record(1, {other}),
                                          record(2, {crash})};
    INFO("difference " << what);
    CHECK_FALSE(judgeGenerations(records, 2, 3));
  }
}

TEST_CASE("verdict: a generation without a failure of the job's own breaks the run",
          "[restart_policy][verdict]") {
  const auto crash = failure(1, 1, kInjected, 3);
  // Generation 1 ended by a lost node or a scale-up: no record.
  CHECK_FALSE(judgeGenerations({record(0, {crash}), record(2, {crash}), record(3, {crash})}, 3, 3));
  // A generation whose only record is a recovery in place does not count either.
  FailureRecord recovered = record(1, {crash});
  recovered.quorum = 2;
  CHECK_FALSE(judgeGenerations({record(0, {crash}), recovered, record(2, {crash})}, 2, 3));
  // Root causes that are not the job's own fault never count, however often they repeat.
  auto comm = failure(1, 3, "ddp::CommError: Connection closed by peer", 3);
  CHECK_FALSE(judgeGenerations(repeated(3, comm), 2, 3));
  for (int signal : {SIGTERM, SIGINT, SIGHUP, SIGQUIT, SIGUSR1, SIGUSR2, SIGKILL}) {
    auto killed = failure(1, 0, "", -1);
    killed.signal = signal;
    INFO("signal " << signal);
    CHECK_FALSE(judgeGenerations(repeated(3, killed), 2, 3));
    auto wrapped = failure(1, 128 + signal, "", -1);  // a shell whose child got the signal
    CHECK_FALSE(judgeGenerations(repeated(3, wrapped), 2, 3));
  }
  auto stopped = crash;
  stopped.stoppedByAgent = true;
  stopped.failureSeq = 0;
  stopped.seqByWorker = false;
  CHECK_FALSE(judgeGenerations(repeated(3, stopped), 2, 3));
  // A crash of the worker's own (SIGSEGV) does.
  auto segv = failure(1, 0, "", -1);
  segv.signal = SIGSEGV;
  const auto v = judgeGenerations(repeated(3, segv), 2, 3);
  REQUIRE(v);
  CHECK_THAT(*v, Catch::Contains("rank 1 SIGSEGV;"));
}

TEST_CASE("verdict: the root cause is the job's order, collateral left out",
          "[restart_policy][verdict]") {
  // Rank 1 (node 1) fails on its own; rank 0 (node 0) sees the connection close: collateral.
  const auto crash = failure(1, 1, kInjected, 3);
  auto comm = failure(0, 3, "ddp::CommError: Connection closed by peer", 3);
  comm.failureSeq = 2;
  std::vector<FailureRecord> records;
  for (int g = 0; g < 3; ++g) {
    records.push_back(record(g, {comm}, 0));
    records.push_back(record(g, {crash}, 1));
  }
  const auto verdict = judgeGenerations(records, 2, 3);
  REQUIRE(verdict);
  CHECK_THAT(*verdict, Catch::Contains("rank 1 exit 1"));
}

TEST_CASE("verdict: no step progress in N generations in a row", "[restart_policy][verdict]") {
  // Different failures each time, but training never gets past step 40 again.
  std::vector<FailureRecord> records = {record(0, {failure(1, 1, "A: a", 40)}),
                                        record(1, {failure(2, 1, "B: b", 35)}),
                                        record(2, {failure(1, 1, "C: c", 40)}),
                                        record(3, {failure(3, 1, "D: d", 12)})};
  const auto verdict = judgeGenerations(records, 3, 3);
  REQUIRE(verdict);
  CHECK(*verdict == "no step progress in 3 generations in a row (the furthest step stays 40; "
                    "last: rank 3 exit 1 'D: d' at step 12); stopping instead of restarting");
  // The run needs a generation before it to set the bar.
  CHECK_FALSE(judgeGenerations(records, 2, 3));
  // One generation gets further: progress, no verdict.
  records[2] = record(2, {failure(1, 1, "C: c", 41)});
  CHECK_FALSE(judgeGenerations(records, 3, 3));
  // A generation whose step is unknown is not judged by progress.
  records[2] = record(2, {failure(1, 1, "C: c", -1)});
  CHECK_FALSE(judgeGenerations(records, 3, 3));
}

TEST_CASE("verdict: the cause text", "[restart_policy][verdict]") {
  auto f = failure(4, 2, std::string(300, 'x') + "\nsecond line", 9);
  const std::string text = causeText(f);
  CHECK(text.starts_with("rank 4 exit 2 'xxx"));
  CHECK(text.ends_with("...' at step 9"));
  CHECK(text.find("second line") == std::string::npos);
  CHECK(countsForVerdict(failure(0, 1, "ValueError: bad config", 0)));
}

TEST_CASE("verdict: with the budget spent, the summary's line keeps the judgement and says the "
          "root cause's exit code stands", "[verdict]") {
  const auto verdict = judgeGenerations(repeated(3, failure(0, 7, "", -1)), 2, 3);
  REQUIRE(verdict);
  CHECK(*verdict == "the same failure in 3 generations in a row: rank 0 exit 7; stopping instead "
                    "of restarting");
  CHECK(budgetSpentNote(*verdict) ==
        "the same failure in 3 generations in a row: rank 0 exit 7; the restart budget is spent "
        "as well: the exit code is the root cause's");
}

// Issue 31 item 4: replacements in place are attempts as restarts are.
TEST_CASE("verdict: replacements in place that fail the same way are judged too",
          "[restart_policy][verdict]") {
  const auto bad = failure(0, 2, "", -1);  // a replacement that cannot open its data
  auto killed = failure(0, 0, "", 40);
  killed.signal = SIGKILL;  // the kill that started it: an outside signal, it does not count
  auto recovery = [](int64_t quorum, const WorkerFailure& f) {
    FailureRecord r = record(0, {f});
    r.quorum = quorum;
    return r;
  };
  std::vector<FailureRecord> records = {recovery(1, killed), recovery(2, bad), recovery(3, bad)};
  records.push_back(record(0, {bad}));  // this failure, judged as the generation's end
  const auto verdict = judgeGenerations(records, 0, 3);
  REQUIRE(verdict);
  CHECK(*verdict == "the same failure 3 times in a row (2 of them replaced in place): rank 0 "
                    "exit 2; stopping instead of restarting");
  // One replacement fewer: the kill is inside the last three, and it does not count.
  records.erase(records.begin() + 2);
  CHECK_FALSE(judgeGenerations(records, 0, 3));
  CHECK(judgeGenerations(records, 0, 2));
  // Recovery records are ordered by quorum, whatever order they were read in.
  std::vector<FailureRecord> shuffled = {recovery(3, bad), recovery(1, killed), recovery(2, bad),
                                         record(0, {bad})};
  CHECK(judgeGenerations(shuffled, 0, 3));
  // A different failure in between breaks the run.
  std::vector<FailureRecord> mixed = {recovery(1, bad), recovery(2, failure(0, 3, "", -1)),
                                      recovery(3, bad), record(0, {bad})};
  CHECK_FALSE(judgeGenerations(mixed, 0, 3));
  CHECK_FALSE(judgeGenerations(mixed, 0, 0));
}
