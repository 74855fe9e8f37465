// FailureSummary: what failed, where, how and first — the records every agent publishes through
// FailureLedger::reportFailure (as JSON, so every node prints the same job-wide summary), the
// parser of torch's @record error files, and torchrun's summary table.
//
// The job's failure order (never a clock; wall and monotonic times are shown, never compared):
//   1. failures with a failure sequence number (the generation's counter in the worker store,
//      rendezvous/store/worker_store_keys.hpp), ascending. A worker linking worker_runtime takes its
//      number itself when it fails, before closing its connections can make a peer fail, and
//      writes it into its error file; the agent takes one when it reaps a failed worker that
//      recorded none (torch workers, signals). So a peer's collateral error is numbered after the
//      fault that caused it whenever that fault was numbered by its worker.
//   2. then failures without a number (worker store unreachable), by node rank, then by the order
//      in which their agent reaped them (reapSeq: exit notifications, node-local);
//   3. the global rank breaks any remaining tie.
// The root cause is the first failure in that order that is
//   - not stopped by ddprun (signalled to stop before it exited, without a failure number of its
//     own: a worker that numbered its failure failed before it was stopped), and
//   - not collateral: a communication failure (isCommunicationFailure) is collateral when the
//     same generation has a worker failing on its own (not a communication failure, not stopped)
//     that is not provably later — i.e. unless that worker numbered its failure itself, after the
//     communication failure's number. One generation's failures all fall into the teardown
//     window of its first failure, so "in the same generation" is what "shortly after" means.
// When no failure qualifies, the first failure in the order is shown.
//
// Thread safety: plain values and pure functions, except readErrorFile (reads one file).
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "rendezvous/base/rank_layout.hpp"
#include "rendezvous/base/signal_name.hpp"

namespace ddp {

// A failed worker: where it sat (the RankLayout it embeds, its WorkerSpec's), then how and when
// it failed. The published JSON carries rank and localRank only ("global_rank", "local_rank"),
// the node rank once per record: a failure read back (failureRecordFromJson) gets groupRank from
// summarize() (the record's nodeRank), and the sizes (worldSize, localWorldSize, groupWorldSize)
// are not known there — they keep RankLayout's defaults.
struct WorkerFailure : RankLayout {
  std::string host;
  int pid = 0;
  int exitCode = 0;         // the exit status when it exited, else 0
  int signal = 0;           // the terminating signal, 0 when it exited
  // Order (see the header comment). failureSeq 0 = no number was taken.
  int64_t failureSeq = 0;
  bool seqByWorker = false;  // the worker took failureSeq itself (its error file), not its agent
  int64_t reapSeq = 0;       // 1, 2, ... in the order this node's agent reaped its workers
  // Display only, never compared.
  int64_t monotonicMs = 0;  // agent's steady clock, ms since the generation's workers started
  int64_t unixMs = 0;       // wall clock at the agent's observation
  std::string errorFile;    // TORCHELASTIC_ERROR_FILE ("" = none, or no longer there)
  std::string message;      // from the error file ("" = not written)
  std::string traceback;    // from the error file ("" = none)
  // The last step the worker reported (worker_runtime's error file, extraInfo.step); -1 = unknown
  // (no error file, or a worker that reports no steps, e.g. a PyTorch script).
  int64_t step = -1;
  std::vector<std::string> stderrTail;  // the worker's last stderr lines
  bool stoppedByAgent = false;          // ddprun stopped it after another failure (see above)
  // Hang detection (hang_monitor.hpp): why ddprun took the worker as hung ("" = it did not), its
  // stacks (trimmed; the whole text is in stacksFile) and whether they show it waiting for its
  // peers (stack_text.hpp) — then it is a communication failure: collateral of a worker that hung
  // on its own.
  std::string hang;
  std::string stacks;
  std::string stacksFile;
  bool waitsForPeer = false;
  // Set by summarize(): whether it is collateral.
  bool collateral = false;
};

// One node's failed workers for one generation.
struct FailureRecord {
  int64_t generation = 0;
  int nodeRank = 0;
  std::string host;
  std::vector<WorkerFailure> failures;
  // >= 0: these workers were replaced in place and the generation went on with quorum
  // (generation, quorum) (docs/recovery.md); such a record is listed as "recovered in place" and
  // is never the generation's record of its node. -1: the failures that ended the generation.
  int64_t quorum = -1;
  bool recoveredInPlace() const { return quorum >= 0; }
};

// The contents of a torch @record error file (both accepted forms, reference §4.6).
struct ErrorFileContents {
  std::string message;
  std::string traceback;
  std::optional<int> errorCode;
  std::optional<int64_t> failureSeq;  // extraInfo.failure_seq (worker_runtime's), when present
  std::optional<int64_t> step;        // extraInfo.step (worker_runtime's), when present
};

// Reads `path`; nullopt when it is missing, empty or not one of torch's forms. Never throws.
std::optional<ErrorFileContents> readErrorFile(const std::string& path);

std::string toJson(const FailureRecord& record);
// Throws ProtocolError when `json` is not a record this version wrote.
FailureRecord failureRecordFromJson(const std::string& json);

// A failure recovered in place: the worker, and the quorum its replacement joined.
struct RecoveredFailure {
  WorkerFailure failure;  // groupRank set
  int64_t generation = 0;
  int64_t quorum = 0;
};

struct FailureSummary {
  WorkerFailure rootCause;
  std::vector<WorkerFailure> others;  // the rest of the failing generation, in the job's order
  int64_t generation = 0;             // the failing generation (the last one with records)
  bool empty = true;
  std::vector<RecoveredFailure> recovered;  // every recovery in place of the job, oldest first
};

// Builds the summary of the last generation that has records, from every published record (any
// order; a second record of the same node and generation is ignored). See the header comment.
// Records of failures recovered in place go to `recovered` only.
FailureSummary summarize(const std::vector<FailureRecord>& records);

// True when `a` comes before `b` in the job's failure order (steps 1-3 of the header comment).
bool failsBefore(const WorkerFailure& a, const WorkerFailure& b);

// torchrun's ChildFailedError table, titled "<entrypoint> FAILED".
std::string formatSummary(const FailureSummary& summary, const std::string& entrypoint);

// Why the rendezvous ended a job when no worker failure explains it (launcher/agent/
// job_summary.hpp): the reason it gives (who aborted the job, the lost store), and the exit code
// ddprun returns for that kind of end.
struct RendezvousCause {
  std::string reason;
  int exitCode = 1;
  std::string kind;  // for the exitcode line, e.g. "the job was ended through the rendezvous"
};

// True when a worker's own failure explains the job's end: the summary has a root cause that
// ddprun did not stop (a stopped worker is an effect of the end, never its cause).
bool workerExplains(const FailureSummary& summary);

// The table with `cause` as its root cause; every failure of `summary` (the workers ddprun
// stopped, the root cause summarize() picked included) is listed under Failures.
std::string formatSummary(const FailureSummary& summary, const std::string& entrypoint,
                          const RendezvousCause& cause);

// The table of formatSummary(summary, entrypoint) for a job an agent's verdict stopped
// (launcher/failures/verdict.hpp): the root cause is headed by the verdict, `verdict.reason` (e.g.
// "Root Cause (the same failure in 3 generations in a row: rank 1 exit 1 '...' at step 3; stopping
// instead of restarting):"), and followed by a line with `verdict.exitCode` and `verdict.kind`.
// Without a worker failure to show (workerExplains false), the table above with the verdict as
// its cause.
std::string formatVerdictSummary(const FailureSummary& summary, const std::string& entrypoint,
                                 const RendezvousCause& verdict);

// formatSummary(summary, entrypoint) for a job whose restart budget was spent by a failure an
// enabled verdict would also have stopped (launcher/failures/verdict.hpp): the root cause is
// followed by a "verdict" line, `verdictNote`; the exit code stays the root cause's.
std::string formatBudgetSpentSummary(const FailureSummary& summary, const std::string& entrypoint,
                                     const std::string& verdictNote);

// True when the failure looks like the collateral of a peer's failure rather than a fault of its
// own: a hung worker whose stacks show it waiting for its peers (a hung worker that does not is
// never one), worker_runtime's CommError exit code (3), or an error-file message / last stderr lines
// naming a broken connection or a collective library error (Gloo "Connection closed by peer",
// "Connection reset by peer", "Broken pipe", NCCL errors, torch's DistNetworkError /
// DistBackendError, ddp::CommError). Pure; never throws.
bool isCommunicationFailure(const WorkerFailure& failure);

// The exit code ddprun returns for a failure: the worker's exit code, or 128 + signal. (A worker's
// own exit code for an exception is worker_runtime's exitCodeFor.)
int ddprunExitCode(const WorkerFailure& failure);

}  // namespace ddp
