// Failure records (JSON round trip), torch error files (both forms), root cause, the table.
#include "launcher/failure_summary.hpp"

#include <catch2/catch.hpp>
#include <csignal>
#include <fstream>

#include "launcher_test_util.hpp"
#include "rendezvous/error.hpp"

namespace ddp {
namespace {

WorkerFailure failure(int rank, int64_t ms, int code, int signal = 0, bool stopped = false) {
  WorkerFailure f;
  f.globalRank = rank;
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
  CHECK_FALSE(readErrorFile(writeTemp("bad.json", "{oops")));
  CHECK_FALSE(readErrorFile("/nonexistent/error.json"));
  CHECK_FALSE(readErrorFile(""));
}

TEST_CASE("the root cause is the first real failure of the first reporting node", "[summary]") {
  // Node 1 reported first for generation 2; generation 1's failure is history.
  std::vector<FailureRecord> records = {
      {1, 0, "node0", {failure(0, 1, 1)}},
      {2, 1, "node1", {failure(3, 5, 0, SIGTERM, true), failure(2, 9, 4), failure(3, 12, 6)}},
      {2, 0, "node0", {failure(1, 2, 5)}},
  };
  const auto summary = summarize(records);
  REQUIRE_FALSE(summary.empty);
  CHECK(summary.rootCause.globalRank == 2);
  CHECK(exitCodeFor(summary.rootCause) == 4);
  CHECK(summary.others.size() == 3);  // generation 2 only
  CHECK(summarize({}).empty);
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
  CHECK(exitCodeFor(root) == 128 + SIGSEGV);
  CHECK(signalName(SIGKILL) == "SIGKILL");
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
