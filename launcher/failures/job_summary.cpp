#include "launcher/failures/job_summary.hpp"

#include <algorithm>
#include <filesystem>
#include <set>

#include "launcher/failures/verdict.hpp"
#include "rendezvous/base/backoff.hpp"
#include "rendezvous/base/duration_text.hpp"
#include "rendezvous/base/logging.hpp"
#include "rendezvous/base/write_all.hpp"

namespace ddp {
namespace {

using Clock = std::chrono::steady_clock;

// Every record that parses; a malformed one is skipped with a warning.
std::vector<FailureRecord> readRecords(Rendezvous& rdzv) {
  std::vector<FailureRecord> out;
  for (const auto& json : rdzv.failures().failureRecords()) {
    try {
      out.push_back(failureRecordFromJson(json));
    } catch (const Error& e) {
      logger("agent")->warn("ignoring a failure record: {}", e.what());
    }
  }
  return out;
}

bool published(const std::vector<FailureRecord>& records, int64_t generation, int nodeRank) {
  return std::any_of(records.begin(), records.end(), [&](const FailureRecord& r) {
    return r.generation == generation && r.nodeRank == nodeRank && !r.recoveredInPlace();
  });
}

// Steps 1 and 2 of the header comment. Returns the records read last.
std::vector<FailureRecord> gatherRecords(Rendezvous& rdzv, const FailedJob& job,
                                         const JobSummarySettings& settings) {
  auto log = logger("agent");
  std::vector<FailureRecord> records = readRecords(rdzv);
  if (!job.round) return records;
  const RendezvousResult& round = *job.round;
  if (!published(records, round.generation, round.nodeRank)) {
    const FailureRecord mine{round.generation, round.nodeRank, settings.host, job.local};
    rdzv.failures().reportFailure(toJson(mine));  // the generation already failed: spends nothing
    records = readRecords(rdzv);
  }
  const auto deadline = Clock::now() + settings.recordWait;
  Backoff backoff(BackoffOptions{std::chrono::milliseconds(10), std::chrono::milliseconds(200)});
  while (!everyNodeReported(records, round.generation, round.nodeCount)) {
    if (!backoff.sleepBefore(deadline)) {
      log->warn("not every node of generation {} published its failure record within {} ms; the "
                "summary shows what was published",
                round.generation, settings.recordWait.count());
      break;
    }
    records = readRecords(rdzv);
  }
  return records;
}

// An error file or stacks file of this node is shown only while it exists; a temporary log dir
// holding one that is shown is kept.
void checkLocalFiles(WorkerFailure& f, const FailedJob& job, KeptLogs& logs) {
  if (!job.round || f.groupRank != job.round->nodeRank) return;
  for (std::string* path : {&f.errorFile, &f.stacksFile}) {
    if (path->empty()) continue;
    std::error_code ec;
    if (!std::filesystem::exists(*path, ec)) {
      path->clear();
      continue;
    }
    logs.keepIfHolds(*path);
  }
}

// Step 3 of the header comment.
int printSummary(const std::vector<FailureRecord>& records, const FailedJob& job,
                 const JobSummarySettings& settings, KeptLogs& logs) {
  FailureSummary summary = summarize(records);
  if (!summary.empty) {
    checkLocalFiles(summary.rootCause, job, logs);
    for (auto& f : summary.others) checkLocalFiles(f, job, logs);
  }
  if (settings.verdict) {
    writeAll(settings.outFd, formatVerdictSummary(summary, settings.entrypoint, *settings.verdict));
    return settings.verdict->exitCode;
  }
  if (workerExplains(summary)) {
    const auto verdict = judgeGenerations(records, summary.generation, settings.verdictAfter);
    writeAll(settings.outFd,
             verdict ? formatBudgetSpentSummary(summary, settings.entrypoint,
                                                budgetSpentNote(*verdict))
                     : formatSummary(summary, settings.entrypoint));
    return ddprunExitCode(summary.rootCause);
  }
  RendezvousCause cause = settings.cause;
  if (cause.reason.empty()) {
    cause.reason = "the job failed on another node without a failure record";
  }
  logger("agent")->error("no worker failure explains the job's end; root cause: {} (exit {})",
                         cause.reason, cause.exitCode);
  writeAll(settings.outFd, formatSummary(summary, settings.entrypoint, cause));
  return cause.exitCode;
}

}  // namespace

bool everyNodeReported(const std::vector<FailureRecord>& records, int64_t generation,
                       int nodeCount) {
  std::set<int> nodes;
  for (const auto& r : records) {
    if (r.generation == generation && r.nodeRank >= 0 && r.nodeRank < nodeCount &&
        !r.recoveredInPlace()) {
      nodes.insert(r.nodeRank);
    }
  }
  return static_cast<int>(nodes.size()) == nodeCount;
}

std::string formatExclusions(const std::vector<NodeExclusion>& list, int64_t count) {
  if (list.empty()) return "";
  std::string out = "Excluded nodes (bad-node exclusion; " + std::to_string(count) +
                    " in the job" + (static_cast<size_t>(count) > list.size() ? ", the newest shown" : "") +
                    "):\n";
  for (const auto& e : list) {
    out += "  generation " + std::to_string(e.generation) + ": node rank " +
           std::to_string(e.nodeRank) + " (" + e.host + ", pid " + std::to_string(e.pid) +
           ") left for " + durationText(std::chrono::milliseconds(e.cooldownMs)) + ", " +
           (e.returnedAt >= 0 ? "back in generation " + std::to_string(e.returnedAt)
                              : std::string("not back")) +
           ": " + e.why + "\n";
  }
  return out;
}

int finishFailedJob(Rendezvous& rdzv, const FailedJob& job, const JobSummarySettings& settings,
                    KeptLogs& logs) {
  auto log = logger("agent");
  try {
    ExclusionBoard& board = rdzv.exclusions();
    writeAll(settings.outFd, formatExclusions(board.list(), board.count()));
  } catch (const Error& e) {
    log->warn("could not read the job's node exclusions ({})", e.what());
  }
  std::vector<FailureRecord> records;
  try {
    records = gatherRecords(rdzv, job, settings);
  } catch (const Error& e) {
    log->warn("could not read the job's failure records ({}); showing what this node has",
              e.what());
  }
  if (job.round && !published(records, job.round->generation, job.round->nodeRank)) {
    records.push_back(
        FailureRecord{job.round->generation, job.round->nodeRank, settings.host, job.local});
  }
  return printSummary(records, job, settings, logs);
}

int summarizeLocally(const FailedJob& job, const JobSummarySettings& settings, KeptLogs& logs) {
  std::vector<FailureRecord> records;
  if (job.round) {
    records.push_back(
        FailureRecord{job.round->generation, job.round->nodeRank, settings.host, job.local});
  }
  return printSummary(records, job, settings, logs);
}

}  // namespace ddp
