// FailureSummary: what failed, where, how and first — the records every agent publishes through
// Rendezvous::reportFailure (as JSON, so every node prints the same job-wide summary), the parser
// of torch's @record error files, and torchrun's summary table.
//
// Root cause: the job's first failure. Across nodes that is the first record published for the
// failing generation (the store orders them); within a node, the worker whose failure the agent
// saw first on its monotonic clock (millisecond resolution, not torchrun's whole seconds). Workers
// ddprun itself stopped while tearing the group down are listed but are never the root cause.
//
// Thread safety: plain values and pure functions, except readErrorFile (reads one file).
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

namespace ddp {

struct WorkerFailure {
  int globalRank = 0;
  int localRank = 0;
  std::string host;
  int pid = 0;
  int exitCode = 0;         // the exit status when it exited, else 0
  int signal = 0;           // the terminating signal, 0 when it exited
  int64_t monotonicMs = 0;  // agent's steady clock, ms since the generation's workers started
  int64_t unixMs = 0;       // wall clock at the agent's observation, for display
  std::string errorFile;    // TORCHELASTIC_ERROR_FILE ("" = none)
  std::string message;      // from the error file ("" = not written)
  std::string traceback;    // from the error file ("" = none)
  std::vector<std::string> stderrTail;  // the worker's last stderr lines
  bool stoppedByAgent = false;          // ddprun stopped it after another failure
};

// One node's failed workers for one generation.
struct FailureRecord {
  int64_t generation = 0;
  int nodeRank = 0;
  std::string host;
  std::vector<WorkerFailure> failures;
};

// The contents of a torch @record error file (both accepted forms, reference §4.6).
struct ErrorFileContents {
  std::string message;
  std::string traceback;
  std::optional<int> errorCode;
};

// Reads `path`; nullopt when it is missing, empty or not one of torch's forms. Never throws.
std::optional<ErrorFileContents> readErrorFile(const std::string& path);

std::string toJson(const FailureRecord& record);
// Throws ProtocolError when `json` is not a record this version wrote.
FailureRecord failureRecordFromJson(const std::string& json);

struct FailureSummary {
  WorkerFailure rootCause;
  std::vector<WorkerFailure> others;  // the rest of the failing generation, in observed order
  bool empty = true;
};

// Builds the summary of the last failed generation from every published record (oldest first).
FailureSummary summarize(const std::vector<FailureRecord>& records);

// torchrun's ChildFailedError table, titled "<entrypoint> FAILED".
std::string formatSummary(const FailureSummary& summary, const std::string& entrypoint);

// True when the failure looks like the collateral of a peer's failure rather than a fault of its
// own: worker_runtime's CommError exit code (3), or an error-file message / last stderr lines
// naming a broken connection or a collective library error (Gloo "Connection closed by peer",
// "Connection reset by peer", "Broken pipe", NCCL errors, torch's DistNetworkError /
// DistBackendError, ddp::CommError). Pure; never throws.
bool isCommunicationFailure(const WorkerFailure& failure);

// The exit code ddprun returns for a failure: the worker's exit code, or 128 + signal.
int exitCodeFor(const WorkerFailure& failure);

// "SIGKILL" for 9, "signal 77" when unnamed.
std::string signalName(int signal);

}  // namespace ddp
