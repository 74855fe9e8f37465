// finishFailedJob over a Rendezvous that records what it is told: this node's record published
// once (also when its workers were only stopped), the other nodes' records waited for (bounded),
// the root cause from all of them, error files shown only while they exist.
#include "launcher/failures/job_summary.hpp"

#include <fcntl.h>
#include <unistd.h>

#include <catch2/catch.hpp>
#include <csignal>
#include <cstdlib>
#include <fstream>
#include <functional>

#include "launcher/workers/log_layout.hpp"
#include "launcher_test_util.hpp"

namespace ddp {
namespace {

using namespace std::chrono_literals;

// Holds the published records; `onRead` runs before each failureRecords() (another node acting).
// It is its own FailureLedger and ExclusionBoard (the board lists `excluded`, claims nothing).
class RecordingRendezvous final : public Rendezvous, public FailureLedger, public ExclusionBoard {
 public:
  NextResult next() override { throw Error("not used"); }
  void publishWorkerStore(const std::string&, uint16_t) override {}
  WorkerStoreResult workerStore() override { throw Error("not used"); }
  std::vector<std::string> memberAddresses() override { throw Error("not used"); }
  void watch(std::function<void(const RendezvousEvent&)>) override {}
  void stopWatching() override {}
  std::optional<RendezvousEvent> awaitRoundEnd(std::chrono::milliseconds) override {
    return std::nullopt;
  }
  ExitBarrierResult exitBarrier(std::chrono::milliseconds) override {
    return RoundEnded{RendezvousEvent{RendezvousEventKind::kJobFailed, 0, "budget spent"}};
  }
  void leave() override {}
  bool awaitOthersLeft(std::chrono::milliseconds) override { return true; }
  void publishRoundRecord(const std::string&, const std::string&) override {}
  RoundRecordsResult roundRecords(const std::string&, const std::vector<int>&,
                                  std::chrono::milliseconds) override {
    throw Error("not used");
  }
  JobSnapshot snapshot() const override { throw Error("not used"); }
  FailureLedger& failures() override { return *this; }
  ExclusionBoard& exclusions() override { return *this; }

  // FailureLedger
  RendezvousEvent reportFailure(const std::string& json) override {
    records.push_back(json);
    ++reports;
    return RendezvousEvent{RendezvousEventKind::kJobFailed, 0, "budget spent"};
  }
  RendezvousEvent reportVerdict(const std::string& json, const std::string& verdict) override {
    records.push_back(json);
    ++reports;
    RendezvousEvent e{RendezvousEventKind::kJobFailed, 0, verdict};
    e.verdict = true;
    return e;
  }
  RecoveryResult recordRecovery(const std::string& json) override {
    records.push_back(json);
    return RecoveryGranted{1};
  }
  std::vector<std::string> failureRecords() override {
    ++reads;
    if (onRead) onRead(reads);
    return records;
  }

  // ExclusionBoard
  ExclusionClaim claim(const NodeExclusion&) override { throw Error("not used"); }
  bool sitOut(std::chrono::milliseconds) override { throw Error("not used"); }
  void markReturned(int64_t) override { throw Error("not used"); }
  std::vector<NodeExclusion> list() override { return excluded; }
  int64_t count() override { return static_cast<int64_t>(excluded.size()); }

  std::vector<std::string> records;
  std::vector<NodeExclusion> excluded;
  std::function<void(int)> onRead;
  int reports = 0;
  int reads = 0;
};

WorkerFailure worker(int rank, int code, int64_t seq, int signal = 0, bool stopped = false) {
  WorkerFailure f;
  f.rank = rank;
  f.host = "node" + std::to_string(rank);
  f.pid = 100 + rank;
  f.exitCode = code;
  f.signal = signal;
  f.failureSeq = seq;
  f.seqByWorker = seq > 0;
  f.stoppedByAgent = stopped;
  return f;
}

RendezvousResult round(int nodeRank, int nodes) {
  RendezvousResult r;
  r.generation = 2;
  r.nodeRank = nodeRank;
  r.nodeCount = nodes;
  return r;
}

struct Output {
  explicit Output(const std::string& dir) : path(dir + "/summary.txt") {
    fd = ::open(path.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
  }
  ~Output() { ::close(fd); }
  std::string text() const { return test::readFile(path); }
  std::string path;
  int fd;
};

}  // namespace

TEST_CASE("a node whose workers were only stopped publishes its record and waits for the rest",
          "[job_summary]") {
  const auto dir = test::scratchDir("jobsummary");
  LogLayout logs(dir + "/logs", "job", false);
  Output out(dir);
  RecordingRendezvous rdzv;
  // Node 1 (the culprit's) publishes only after this node has read the records twice.
  rdzv.onRead = [&](int reads) {
    if (reads == 3) rdzv.records.push_back(toJson({2, 1, "node1", {worker(1, 1, 1)}}));
  };
  const FailedJob job{round(0, 2), {worker(0, 0, 0, SIGTERM, true)}};
  const int code = finishFailedJob(rdzv, job, {"node0", "train", 30s, out.fd}, logs);
  CHECK(code == 1);  // node 1's worker's exit code
  CHECK(rdzv.reports == 1);
  REQUIRE(rdzv.records.size() == 2);
  CHECK(failureRecordFromJson(rdzv.records[0]).nodeRank == 0);
  const std::string text = out.text();
  const std::string root = text.substr(text.find("Root Cause"));
  CHECK(root.find("rank      : 1 ") != std::string::npos);
  CHECK(text.find("stopped by ddprun") != std::string::npos);
}

TEST_CASE("the summary lists the job's node exclusions before the table", "[job_summary]") {
  const auto dir = test::scratchDir("jobsummary-excluded");
  LogLayout logs(dir + "/logs", "job", false);
  Output out(dir);
  RecordingRendezvous rdzv;
  rdzv.records.push_back(toJson({2, 1, "node1", {worker(1, 1, 1)}}));
  NodeExclusion e;
  e.host = "node7";
  e.pid = 77;
  e.nodeRank = 2;
  e.generation = 1;
  e.why = "3 failure(s) of this node's workers within 600 s";
  e.cooldownMs = 600000;
  rdzv.excluded = {e};
  finishFailedJob(rdzv, FailedJob{round(0, 2), {worker(0, 0, 0, SIGTERM, true)}},
                  {"node0", "train", 30s, out.fd}, logs);
  const std::string text = out.text();
  CHECK_THAT(text, Catch::Contains("Excluded nodes (bad-node exclusion; 1 in the job):\n"
                                   "  generation 1: node rank 2 (node7, pid 77) left for 600 s, "
                                   "not back: 3 failure(s)"));
  CHECK(text.find("Excluded nodes") < text.find("Root Cause"));
  CHECK(formatExclusions({}, 0).empty());
}

TEST_CASE("a job no worker failure explains: the rendezvous' reason is the root cause, not 143",
          "[job_summary]") {
  const auto dir = test::scratchDir("jobsummary-aborted");
  LogLayout logs(dir + "/logs", "job", false);
  Output out(dir);
  RecordingRendezvous rdzv;
  // Both nodes' workers were stopped by their agents when a foreign client ended the job.
  rdzv.records.push_back(toJson({2, 1, "node1", {worker(1, 0, 0, SIGTERM, true)}}));
  const FailedJob job{round(0, 2), {worker(0, 0, 0, SIGTERM, true)}};
  JobSummarySettings settings{"node0", "train", 30s, out.fd};
  settings.cause = RendezvousCause{"the rendezvous ended the job: ended by a foreign client", 85,
                                   "the job was ended through the rendezvous, not by a worker"};
  CHECK(finishFailedJob(rdzv, job, settings, logs) == 85);
  const std::string text = out.text();
  const std::string root = text.substr(text.find("Root Cause"));
  CHECK(root.find("rendezvous: the rendezvous ended the job: ended by a foreign client") !=
        std::string::npos);
  CHECK(root.find("exitcode  : 85 (the job was ended through the rendezvous") !=
        std::string::npos);
  CHECK(root.find("SIGTERM") == std::string::npos);
  // Both stopped workers are listed as what happened, not as the cause.
  const std::string failures = text.substr(0, text.find("Root Cause"));
  CHECK(failures.find("rank      : 0 ") != std::string::npos);
  CHECK(failures.find("rank      : 1 ") != std::string::npos);
}

TEST_CASE("a job a verdict stopped: the verdict heads the root cause, and its exit code",
          "[job_summary][verdict]") {
  const auto dir = test::scratchDir("jobsummary-verdict");
  LogLayout logs(dir + "/logs", "job", false);
  Output out(dir);
  RecordingRendezvous rdzv;
  rdzv.records.push_back(toJson({2, 1, "node1", {worker(1, 1, 1)}}));
  const FailedJob job{round(0, 2), {worker(0, 0, 0, SIGTERM, true)}};
  JobSummarySettings settings{"node0", "train", 30s, out.fd};
  const std::string line = "the same failure in 3 generations in a row: rank 1 exit 1 at step 3; "
                           "stopping instead of restarting";
  settings.verdict = RendezvousCause{line, 87, "the job stopped with a verdict instead of "
                                               "restarting; --verdict-after=3"};
  CHECK(finishFailedJob(rdzv, job, settings, logs) == 87);  // not the worker's 1
  const std::string text = out.text();
  const std::string root = text.substr(text.find("Root Cause"));
  CHECK(root.starts_with("Root Cause (" + line + "):\n[0]:\n"));
  CHECK(root.find("rank      : 1 ") != std::string::npos);
  CHECK(root.find("verdict   : exitcode 87 (the job stopped with a verdict") != std::string::npos);
  // No worker to show (every record a stopped worker): the verdict is the rendezvous' cause.
  Output out2(test::scratchDir("jobsummary-verdict2"));
  RecordingRendezvous stopped;
  stopped.records.push_back(toJson({2, 1, "node1", {worker(1, 0, 0, SIGTERM, true)}}));
  settings.outFd = out2.fd;
  CHECK(finishFailedJob(stopped, job, settings, logs) == 87);
  CHECK(out2.text().find("rendezvous: " + line) != std::string::npos);
}

// Issue 30 item 3: the verdict never takes the root cause's exit code when the budget is spent.
TEST_CASE("a spent budget whose last failure an enabled verdict would have stopped: the root "
          "cause's exit code, the verdict a line", "[job_summary][verdict]") {
  const auto dir = test::scratchDir("jobsummary-verdict-spent");
  LogLayout logs(dir + "/logs", "job", false);
  const FailedJob job{round(0, 1), {worker(0, 7, 3)}};  // generation 2, this node's own
  const auto summaryWith = [&](int verdictAfter) {
    Output out(dir);
    RecordingRendezvous rdzv;
    for (int g = 0; g < 2; ++g) rdzv.records.push_back(toJson({g, 0, "node0", {worker(0, 7, 1)}}));
    JobSummarySettings settings{"node0", "train", 30s, out.fd};
    settings.verdictAfter = verdictAfter;
    const int code = finishFailedJob(rdzv, job, settings, logs);
    return std::make_pair(code, out.text());
  };
  const auto [code, text] = summaryWith(3);
  CHECK(code == 7);  // the worker's, not 87
  const std::string root = text.substr(text.find("Root Cause"));
  CHECK(root.starts_with("Root Cause (first observed failure):\n[0]:\n"));
  CHECK(root.find("verdict   : the same failure in 3 generations in a row: rank 0 exit 7; the "
                  "restart budget is spent as well: the exit code is the root cause's\n") !=
        std::string::npos);
  CHECK(root.find("exitcode 87") == std::string::npos);
  // Off (the default), or not yet due (a 4th generation would be needed): no verdict line.
  for (int after : {0, 4}) {
    const auto [offCode, offText] = summaryWith(after);
    CHECK(offCode == 7);
    CHECK(offText.find("verdict") == std::string::npos);
  }
}

TEST_CASE("the lost store as the cause of this node's own summary", "[job_summary]") {
  const auto dir = test::scratchDir("jobsummary-storelost");
  LogLayout logs(dir + "/logs", "job", false);
  Output out(dir);
  JobSummarySettings settings{"node0", "train", 30s, out.fd};
  settings.cause = RendezvousCause{"the rendezvous store was lost: no answer for 15000 ms", 86,
                                   "the rendezvous store was lost"};
  const FailedJob stopped{round(0, 2), {worker(0, 0, 0, SIGTERM, true)}};
  CHECK(summarizeLocally(stopped, settings, logs) == 86);
  CHECK(out.text().find("rendezvous: the rendezvous store was lost") != std::string::npos);
  // A worker that failed on its own meanwhile is the cause, with its exit code.
  const FailedJob crashed{round(0, 2), {worker(0, 7, 1)}};
  CHECK(summarizeLocally(crashed, settings, logs) == 7);
}

TEST_CASE("a published record is not published again; a missing node is waited for boundedly",
          "[job_summary]") {
  const auto dir = test::scratchDir("jobsummary-bounded");
  LogLayout logs(dir + "/logs", "job", false);
  Output out(dir);
  RecordingRendezvous rdzv;
  rdzv.records.push_back(toJson({2, 0, "node0", {worker(0, 7, 1)}}));
  const FailedJob job{round(0, 3), {worker(0, 7, 1)}};
  const auto start = std::chrono::steady_clock::now();
  CHECK(finishFailedJob(rdzv, job, {"node0", "train", 50ms, out.fd}, logs) == 7);
  CHECK(std::chrono::steady_clock::now() - start >= 50ms);
  CHECK(rdzv.reports == 0);
  CHECK(rdzv.reads >= 2);
}

TEST_CASE("an error file of this node is named only while it exists, and a temp dir holding it "
          "is kept", "[job_summary]") {
  const auto dir = test::scratchDir("jobsummary-files");
  const auto tmp = dir + "/tmp";
  std::filesystem::create_directories(tmp);
  const char* oldTmp = std::getenv("TMPDIR");
  const std::string restore = oldTmp != nullptr ? oldTmp : "";
  ::setenv("TMPDIR", tmp.c_str(), 1);
  std::string kept;
  {
    LogLayout logs("", "job", false);
    logs.beginGeneration(2, 0);
    logs.prepare(2, 2);
    Output out(dir);
    auto present = worker(0, 1, 1);
    present.errorFile = logs.errorFilePath(2, 0);
    present.message = "ddp::Error: boom";
    std::ofstream(present.errorFile) << "{}";
    auto gone = worker(1, 3, 2);
    gone.errorFile = logs.errorFilePath(2, 1);  // never written
    gone.message = "ddp::CommError: reset";
    RecordingRendezvous rdzv;
    CHECK(finishFailedJob(rdzv, {round(0, 1), {present, gone}}, {"node0", "t", 1s, out.fd},
                          logs) == 1);
    const std::string text = out.text();
    CHECK(text.find("error_file: " + present.errorFile) != std::string::npos);
    CHECK(text.find(gone.errorFile) == std::string::npos);
    kept = present.errorFile;
  }
  if (restore.empty()) {
    ::unsetenv("TMPDIR");
  } else {
    ::setenv("TMPDIR", restore.c_str(), 1);
  }
  CHECK(kept.rfind(tmp + "/ddprun_", 0) == 0);
  CHECK(std::filesystem::exists(kept));
}

TEST_CASE("everyNodeReported counts the nodes of one generation", "[job_summary]") {
  const std::vector<FailureRecord> records = {{1, 0, "a", {}}, {2, 0, "a", {}}, {2, 2, "c", {}}};
  CHECK_FALSE(everyNodeReported(records, 2, 3));
  CHECK(everyNodeReported(records, 2, 1));
  CHECK(everyNodeReported({{2, 0, "a", {}}, {2, 1, "b", {}}}, 2, 2));
}

}  // namespace ddp
