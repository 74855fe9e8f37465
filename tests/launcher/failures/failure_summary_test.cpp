// Failure records (JSON round trip), torch error files (both forms), the job's failure order and
// its root cause (never by clock, never by which node reported first), the table.
#include "launcher/failures/failure_summary.hpp"

#include <algorithm>
#include <catch2/catch.hpp>
#include <csignal>
#include <fstream>
#include <nlohmann/json.hpp>

#include "launcher_test_util.hpp"
#include "rendezvous/base/error.hpp"

namespace ddp {
namespace {

// `ms` is only ever displayed: the order comes from failureSeq / reapSeq.
WorkerFailure failure(int rank, int64_t ms, int code, int signal = 0, bool stopped = false) {
  WorkerFailure f;
  f.rank = rank;
  f.localRank = rank % 2;
  f.host = "node" + std::to_string(rank / 2);
  f.pid = 1000 + rank;
  f.exitCode = code;
  f.signal = signal;
  f.monotonicMs = ms;
  f.unixMs = 1700000000000 + ms;
  f.stoppedByAgent = stopped;
  return f;
}

std::string writeTemp(const std::string& name, const std::string& text) {
  const std::string path = test::scratchDir("errfile") + "/" + name;
  std::ofstream(path) << text;
  return path;
}

}  // namespace

TEST_CASE("a failure record survives JSON", "[summary]") {
  FailureRecord record{3, 1, "node1", {failure(2, 15, 7), failure(3, 20, 0, SIGTERM, true)}};
  record.failures[0].message = "RuntimeError: x\"y";
  record.failures[0].stderrTail = {"a", "b\tc"};
  const auto back = failureRecordFromJson(toJson(record));
  CHECK(back.generation == 3);
  CHECK(back.nodeRank == 1);
  REQUIRE(back.failures.size() == 2);
  CHECK(back.failures[0].message == "RuntimeError: x\"y");
  CHECK(back.failures[0].stderrTail == std::vector<std::string>{"a", "b\tc"});
  CHECK(back.failures[1].signal == SIGTERM);
  CHECK(back.failures[1].stoppedByAgent);
  CHECK_THROWS_AS(failureRecordFromJson("{\"version\": 1}"), ProtocolError);
  CHECK_THROWS_AS(failureRecordFromJson("not json"), ProtocolError);
}

TEST_CASE("a record carries the failure numbers, and older records still parse", "[summary]") {
  FailureRecord record{0, 0, "node0", {failure(1, 5, 1)}};
  record.failures[0].failureSeq = 7;
  record.failures[0].seqByWorker = true;
  record.failures[0].reapSeq = 2;
  const auto back = failureRecordFromJson(toJson(record));
  REQUIRE(back.failures.size() == 1);
  CHECK(back.failures[0].failureSeq == 7);
  CHECK(back.failures[0].seqByWorker);
  CHECK(back.failures[0].reapSeq == 2);
  const auto old = failureRecordFromJson(
      R"({"version": 1, "generation": 0, "node_rank": 0, "host": "h", "failures": [
         {"global_rank": 0, "local_rank": 0, "host": "h", "pid": 1, "exit_code": 1, "signal": 0,
          "monotonic_ms": 1, "unix_ms": 1, "error_file": "", "message": "", "traceback": "",
          "stderr_tail": [], "stopped_by_agent": false}]})");
  REQUIRE(old.failures.size() == 1);
  CHECK(old.failures[0].failureSeq == 0);
  CHECK(old.failures[0].step == -1);  // no step known
  record.failures[0].step = 41;         // the verdict compares it (launcher/failures/verdict.hpp)
  CHECK(failureRecordFromJson(toJson(record)).failures[0].step == 41);
}

TEST_CASE("torch @record error files are read in both forms", "[summary]") {
  const auto nested = readErrorFile(writeTemp(
      "nested.json",
      R"({"message": {"message": "ValueError: bad", "extraInfo": {"py_callstack": "Traceback...\n  line 3", "timestamp": "1"}, "errorCode": 9}})"));
  REQUIRE(nested);
  CHECK(nested->message == "ValueError: bad");
  CHECK(nested->traceback == "Traceback...\n  line 3");
  CHECK(nested->errorCode == 9);
  const auto flat =
      readErrorFile(writeTemp("flat.json", R"({"message": "plain text", "timestamp": 5})"));
  REQUIRE(flat);
  CHECK(flat->message == "plain text");
  CHECK(flat->traceback.empty());
  CHECK_FALSE(nested->failureSeq);
  const auto numbered = readErrorFile(writeTemp(
      "numbered.json",
      R"({"message": {"message": "ddp::Error: x", "extraInfo": {"py_callstack": "", "timestamp": "1", "failure_seq": "4"}}})"));
  REQUIRE(numbered);
  CHECK(numbered->failureSeq == 4);
  CHECK_FALSE(numbered->step);
  const auto stepped = readErrorFile(writeTemp(
      "stepped.json",
      R"({"message": {"message": "x", "extraInfo": {"failure_seq": "4", "step": "0"}}})"));
  REQUIRE(stepped);
  CHECK(stepped->step == 0);  // step 0 is a step (failure numbers start at 1)
  const auto asNumber = readErrorFile(writeTemp(
      "number.json", R"({"message": {"message": "x", "extraInfo": {"failure_seq": 9}}})"));
  REQUIRE(asNumber);
  CHECK(asNumber->failureSeq == 9);
  const auto garbage = readErrorFile(writeTemp(
      "garbage.json", R"({"message": {"message": "x", "extraInfo": {"failure_seq": "9x"}}})"));
  REQUIRE(garbage);
  CHECK_FALSE(garbage->failureSeq);
  CHECK_FALSE(readErrorFile(writeTemp("bad.json", "{oops")));
  CHECK_FALSE(readErrorFile("/nonexistent/error.json"));
  CHECK_FALSE(readErrorFile(""));
}

WorkerFailure numbered(WorkerFailure f, int64_t seq, bool byWorker) {
  f.failureSeq = seq;
  f.seqByWorker = byWorker;
  return f;
}

WorkerFailure commError(int rank, int64_t ms) {
  WorkerFailure f = failure(rank, ms, 3);
  f.message = "ddp::CommError: allreduce of 4 bytes failed: Connection reset by peer";
  return f;
}

TEST_CASE("only the last generation is summarised, once per node", "[summary]") {
  std::vector<FailureRecord> records = {
      {1, 0, "node0", {numbered(failure(0, 1, 1), 1, true)}},
      {2, 1, "node1", {failure(3, 5, 0, SIGTERM, true), numbered(failure(2, 9, 4), 2, false)}},
      {2, 0, "node0", {numbered(failure(1, 2, 5), 1, false)}},
      {2, 0, "node0", {numbered(failure(0, 2, 6), 0, false)}},  // a second record: ignored
  };
  const auto summary = summarize(records);
  REQUIRE_FALSE(summary.empty);
  CHECK(summary.generation == 2);
  CHECK(summary.rootCause.rank == 1);  // #1 of generation 2, on the node reporting second
  CHECK(summary.rootCause.groupRank == 0);
  CHECK(ddprunExitCode(summary.rootCause) == 5);
  REQUIRE(summary.others.size() == 2);
  CHECK(summary.others[0].rank == 2);
  CHECK(summary.others[1].rank == 3);
  CHECK(summarize({}).empty);
}

TEST_CASE("the failure order is the numbers, then node and reap order, never a clock",
          "[summary]") {
  // Clocks say rank 3 first; the numbers say rank 2 then 1; rank 0 has no number.
  auto r0 = failure(0, 1, 1);
  r0.reapSeq = 1;
  auto r1 = numbered(failure(1, 500, 1), 2, true);
  auto r2 = numbered(failure(2, 900, 1), 1, false);
  auto r3 = failure(3, 0, 1);
  r3.reapSeq = 2;
  std::vector<FailureRecord> records = {{0, 1, "node1", {r2, r3}}, {0, 0, "node0", {r0, r1}}};
  const auto summary = summarize(records);
  CHECK(summary.rootCause.rank == 2);
  std::vector<int> order;
  for (const auto& f : summary.others) order.push_back(f.rank);
  CHECK(order == std::vector<int>{1, 0, 3});  // unnumbered: node 0 before node 1
  CHECK(failsBefore(r2, r1));
  CHECK_FALSE(failsBefore(r1, r2));
}

TEST_CASE("a worker ddprun stopped is never the root cause", "[summary]") {
  // Stopped with the lower number; the real failure numbered after it.
  auto stopped = numbered(failure(0, 1, 0, SIGTERM, true), 1, false);
  auto real = numbered(failure(1, 2, 7), 2, false);
  const auto summary = summarize({{0, 0, "node0", {stopped, real}}});
  CHECK(summary.rootCause.rank == 1);
  // With nothing but stopped workers, the first of them is still shown.
  const auto onlyStopped = summarize({{0, 0, "node0", {stopped}}});
  REQUIRE_FALSE(onlyStopped.empty);
  CHECK(onlyStopped.rootCause.rank == 0);
}

TEST_CASE("a communication error after a peer's own failure is collateral", "[summary]") {
  SECTION("the victim numbered first, the culprit numbered by its agent (a signal)") {
    auto victim = numbered(commError(0, 1), 1, true);
    auto culprit = numbered(failure(1, 2, 0, SIGSEGV), 2, false);
    const auto summary = summarize({{0, 0, "node0", {victim, culprit}}});
    CHECK(summary.rootCause.rank == 1);
    REQUIRE(summary.others.size() == 1);
    CHECK(summary.others[0].collateral);
  }
  SECTION("nobody numbered (worker store gone): the victim reaped first") {
    auto victim = commError(0, 1);
    victim.reapSeq = 1;
    auto culprit = failure(1, 2, 1);
    culprit.reapSeq = 2;
    CHECK(summarize({{0, 0, "node0", {victim, culprit}}}).rootCause.rank == 1);
  }
  SECTION("a communication error provably before the other failure is the root cause") {
    auto first = numbered(commError(0, 1), 1, true);
    auto later = numbered(failure(1, 2, 1), 2, true);  // numbered by the worker itself, after
    const auto summary = summarize({{0, 0, "node0", {first, later}}});
    CHECK(summary.rootCause.rank == 0);
    CHECK_FALSE(summary.rootCause.collateral);
  }
  SECTION("only communication errors: the first one") {
    auto a = numbered(commError(0, 1), 2, true);
    auto b = numbered(commError(1, 1), 1, true);
    CHECK(summarize({{0, 0, "node0", {a, b}}}).rootCause.rank == 1);
  }
}

TEST_CASE("every node builds the same summary whatever order the records came in", "[summary]") {
  // Node 0's victim reported first; the culprit is on node 1, which reported second.
  FailureRecord first{0, 0, "node0", {numbered(commError(0, 1), 2, true)}};
  FailureRecord second{0, 1, "node1", {numbered(failure(1, 9, 1), 1, true),
                                       failure(2, 9, 0, SIGTERM, true)}};
  FailureRecord stoppedOnly{0, 2, "node2", {failure(3, 9, 0, SIGTERM, true)}};
  std::vector<FailureRecord> records = {first, second, stoppedOnly};
  std::sort(records.begin(), records.end(),
            [](const auto& a, const auto& b) { return a.nodeRank < b.nodeRank; });
  const std::string expected = formatSummary(summarize(records), "train");
  CHECK(summarize(records).rootCause.rank == 1);
  do {
    CHECK(formatSummary(summarize(records), "train") == expected);
  } while (std::next_permutation(records.begin(), records.end(), [](const auto& a, const auto& b) {
    return a.nodeRank < b.nodeRank;
  }));
}

TEST_CASE("the table names ranks, hosts, codes, signals and stderr", "[summary]") {
  auto root = failure(1, 42, 0, SIGSEGV);
  root.stderrTail = {"last words"};
  auto other = failure(0, 50, 143, 0, true);
  other.message = "KeyboardInterrupt";
  other.errorFile = "/x/error.json";
  FailureRecord record{0, 0, "node0", {root, other}};
  const auto text = formatSummary(summarize({record}), "train.py");
  CHECK(text.find("train.py FAILED") != std::string::npos);
  CHECK(text.find("Root Cause (first observed failure):") != std::string::npos);
  CHECK(text.find("rank      : 1 (local_rank: 1)") != std::string::npos);
  CHECK(text.find("exitcode  : -11 (SIGSEGV) (pid: 1001)") != std::string::npos);
  CHECK(text.find("Signal 11 (SIGSEGV) received by PID 1001") != std::string::npos);
  CHECK(text.find("last words") != std::string::npos);
  CHECK(text.find("error_file: /x/error.json") != std::string::npos);
  CHECK(text.find("stopped by ddprun") != std::string::npos);
  CHECK(ddprunExitCode(root) == 128 + SIGSEGV);
  CHECK(signalName(SIGKILL) == "SIGKILL");
}

TEST_CASE("the table shows the order and collateral, and no traceback line twice", "[summary]") {
  auto culprit = numbered(failure(1, 5, 1), 1, true);
  culprit.message = "ddp::Error: injected failure: rank 1 stops at step 150";
  culprit.traceback = "ddp::Error: injected failure: rank 1 stops at step 150\n";
  culprit.errorFile = "/logs/node_0/attempt_0/1/error.json";
  auto victim = numbered(commError(0, 6), 2, true);
  const auto text = formatSummary(summarize({{0, 0, "node0", {victim, culprit}}}), "train");
  CHECK(text.find("order     : #1 in the job's failure order (numbered by the worker") !=
        std::string::npos);
  CHECK(text.find("note      : collateral") != std::string::npos);
  CHECK(text.find("host      : node0 (node rank 0)") != std::string::npos);
  const std::string line = "injected failure: rank 1 stops at step 150";
  const auto firstAt = text.find(line);
  REQUIRE(firstAt != std::string::npos);
  CHECK(text.find(line, firstAt + 1) == std::string::npos);
  // A Python traceback ends with the message: shown once as well.
  auto py = failure(0, 1, 1);
  py.message = "ValueError: bad";
  py.traceback = "Traceback (most recent call last):\n  File \"x.py\", line 1\nValueError: bad";
  const auto pyText = formatSummary(summarize({{0, 0, "n", {py}}}), "x.py");
  const auto at = pyText.find("ValueError: bad");
  REQUIRE(at != std::string::npos);
  CHECK(pyText.find("ValueError: bad", at + 1) == std::string::npos);
  // An error file without a message, or whose path was dropped, is not named.
  auto gone = failure(0, 1, 1);
  gone.message = "x";
  CHECK(formatSummary(summarize({{0, 0, "n", {gone}}}), "x").find("error_file: <N/A>") !=
        std::string::npos);
}

TEST_CASE("communication errors are told apart from a worker's own fault", "[summary]") {
  WorkerFailure own = failure(0, 10, 1);
  own.message = "RuntimeError: injected crash on rank 0";
  CHECK_FALSE(isCommunicationFailure(own));
  CHECK_FALSE(isCommunicationFailure(failure(1, 10, 0, SIGKILL)));
  CHECK(isCommunicationFailure(failure(1, 10, 3)));  // worker_runtime's CommError exit code
  WorkerFailure gloo = failure(2, 12, 1);
  gloo.message = "RuntimeError: [../third_party/gloo/gloo/transport/tcp/pair.cc:598] "
                 "Connection closed by peer [127.0.0.1]:41234";
  CHECK(isCommunicationFailure(gloo));
  WorkerFailure tail = failure(3, 12, 1);
  tail.stderrTail = {"Traceback (most recent call last):",
                     "RuntimeError: Connection reset by peer"};
  CHECK(isCommunicationFailure(tail));
}

}  // namespace ddp

namespace ddp {

TEST_CASE("a hung worker's record carries its hang and stacks; older records parse without",
          "[summary][hang]") {
  FailureRecord record{1, 0, "node0", {failure(1, 5, 0, SIGKILL)}};
  record.failures[0].hang = "no progress report for 3.0 s";
  record.failures[0].stacks = "Thread 1:\n#0 injectedHang\n";
  record.failures[0].stacksFile = "/logs/stacks.txt";
  record.failures[0].waitsForPeer = true;
  const auto back = failureRecordFromJson(toJson(record));
  CHECK(back.failures[0].hang == "no progress report for 3.0 s");
  CHECK(back.failures[0].stacks == "Thread 1:\n#0 injectedHang\n");
  CHECK(back.failures[0].stacksFile == "/logs/stacks.txt");
  CHECK(back.failures[0].waitsForPeer);
  auto old = nlohmann::json::parse(toJson(record));
  for (const char* key : {"hang", "stacks", "stacks_file", "waits_for_peer"}) {
    old["failures"][0].erase(key);
  }
  const auto parsed = failureRecordFromJson(old.dump());
  CHECK(parsed.failures[0].hang.empty());
  CHECK_FALSE(parsed.failures[0].waitsForPeer);
}

TEST_CASE("of two hung workers, the one waiting for its peers is collateral of the other",
          "[summary][hang]") {
  // The waiter was numbered first: the order of their last progress put it there.
  auto waiter = failure(0, 10, 0, SIGKILL);
  waiter.failureSeq = 1;
  waiter.hang = "no progress report for 3.0 s";
  waiter.stacks = "#3 ddp::GlooCommunicator::allreduce\n";
  waiter.waitsForPeer = true;
  auto sleeper = failure(1, 10, 0, SIGKILL);
  sleeper.failureSeq = 2;
  sleeper.hang = "no progress report for 3.0 s";
  sleeper.stacks = "#3 injectedHang\n";
  sleeper.stacksFile = "/logs/node_0/attempt_0/1/stacks.txt";
  CHECK(isCommunicationFailure(waiter));
  CHECK_FALSE(isCommunicationFailure(sleeper));
  const auto summary = summarize({{0, 0, "node0", {waiter, sleeper}}});
  CHECK(summary.rootCause.rank == 1);
  REQUIRE(summary.others.size() == 1);
  CHECK(summary.others[0].collateral);
  const std::string table = formatSummary(summary, "train");
  CHECK(table.find("hang      : no progress report for 3.0 s") != std::string::npos);
  CHECK(table.find("whole text: /logs/node_0/attempt_0/1/stacks.txt") != std::string::npos);
  CHECK(table.find("#3 injectedHang") > table.find("Root Cause"));
  CHECK(table.find("numbered by ddprun when it found the worker hung") != std::string::npos);
  CHECK(table.find("its stacks show it waiting for its peers while rank 1") != std::string::npos);
  CHECK(table.find("stopped by ddprun") == std::string::npos);  // hung is not "stopped"
}

TEST_CASE("a hung worker is never a communication failure by its stderr alone", "[summary][hang]") {
  auto hung = failure(0, 10, 0, SIGABRT);
  hung.hang = "no output, CPU time or timer request for 2.0 s";
  hung.stderrTail = {"Connection reset by peer"};  // an earlier line: the hang is what ended it
  CHECK_FALSE(isCommunicationFailure(hung));
}

}  // namespace ddp
