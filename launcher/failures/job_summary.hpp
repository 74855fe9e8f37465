// Job summary: how an agent ends a failed job — with the same job-wide failure summary on every
// node (docs/running.md#failures-restarts-and-the-failure-summary).
//
// finishFailedJob():
//   1. publishes this node's record of its last generation through FailureLedger::reportFailure,
//      unless the rendezvous already holds one for that node and generation (the node whose
//      failure spent the budget published it before deciding) — also when its workers were only
//      stopped, or all succeeded: a node's record is what tells the others it has nothing more;
//   2. waits, at most `recordWait`, until every node of that generation has published (re-reading
//      the records with a backoff of 10 to 200 ms); a node that never does is missing from the
//      summary (a warning says so);
//   3. builds the summary from every record (failure_summary.hpp: ordered by the job-wide failure
//      numbers, never by which node reported first; wall time for display only), drops the path of
//      an error file of this node that no longer exists, keeps a temporary log dir holding one
//      that is shown (KeptLogs::keepIfHolds), prints the table to `outFd`, and returns the root cause's
//      exit code. When no worker failure explains the end (every failed worker was one ddprun
//      stopped, or there is no record at all: the job was aborted through the rendezvous), the
//      root cause is the rendezvous' reason instead (settings.cause), with its exit code —
//      never a stopped worker's 143. When a verdict stopped the job (settings.verdict), its line
//      heads the root cause and its exit code is returned; when an enabled verdict
//      (settings.verdictAfter) would have fired as the budget was spent, it is a line of the
//      root cause and the root cause's exit code is returned.
//
//   4. before the table, lists the job's node exclusions (ExclusionBoard::list(); none: nothing
//      is printed): each node's generation, host and pid, cooldown, whether it came back, why.
//
// summarizeLocally(): the same table from this node's own workers only, when the store that holds
// the others' records is gone (the rendezvous store was lost).
//
// Thread safety: call from one thread; `logs` must not be used by another thread meanwhile.
#pragma once

#include <chrono>
#include <optional>
#include <string>
#include <vector>

#include "launcher/failures/failure_summary.hpp"
#include "launcher/failures/kept_logs.hpp"
#include "rendezvous/algorithm/rendezvous.hpp"

namespace ddp {

struct FailedJob {
  // This node's last round, whose generation failed; nullopt when it joined none (the job had
  // ended before): then nothing is published and nothing is waited for.
  std::optional<RendezvousResult> round;
  // This node's workers of that round that did not exit 0 (failed or stopped); may be empty.
  std::vector<WorkerFailure> local;
};

struct JobSummarySettings {
  std::string host;        // this node's host name (its record)
  std::string entrypoint;  // the table's title
  // How long to wait for the other nodes' records (their agents stop their workers first, within
  // their --shutdown-timeout).
  std::chrono::milliseconds recordWait{std::chrono::seconds(35)};
  int outFd = 2;
  // Why the rendezvous ended the job, and the exit code of that kind of end: the root cause when
  // no worker failure explains it (see the header comment).
  RendezvousCause cause{};
  // An agent's verdict stopped the job (launcher/failures/verdict.hpp): its line heads the root
  // cause, and its exit code is returned whatever the root cause (formatVerdictSummary).
  std::optional<RendezvousCause> verdict{};
  // --verdict-after (0 = off): without `verdict`, when a worker's failure explains the end (the
  // restart budget spent) and the verdict would have fired on that generation, the summary shows
  // it as a line of the root cause (verdict.hpp budgetSpentNote); the exit code stays the root
  // cause's.
  int verdictAfter = 0;
};

// See the header comment. Blocks up to recordWait plus the rendezvous' own store budgets. Throws
// nothing the caller must handle: store errors are logged and the summary is built from what was
// read.
int finishFailedJob(Rendezvous& rdzv, const FailedJob& job, const JobSummarySettings& settings,
                    KeptLogs& logs);
// Prints the summary of this node's `job.local` (no store call); returns its exit code.
int summarizeLocally(const FailedJob& job, const JobSummarySettings& settings, KeptLogs& logs);

// The exclusions' lines of the summary ("" when `list` is empty); `count`: the job's total.
std::string formatExclusions(const std::vector<NodeExclusion>& list, int64_t count);

// True when `records` hold a record of `generation` from each of node ranks 0..nodeCount-1.
bool everyNodeReported(const std::vector<FailureRecord>& records, int64_t generation,
                       int nodeCount);

}  // namespace ddp
