// FailureLedger: what the failures of a job's workers decide, kept job-wide in the rendezvous
// store. Each node reports its workers' failures here: a report spends one restart of the job's
// budget (--max-restarts) and ends the round for every node (kRestartRequested), or ends the job
// when the budget is spent (kJobFailed) or when the reporting agent's verdict judges restarting
// hopeless (launcher/failures/verdict.hpp); a recovery in place (docs/recovery.md) spends one
// restart and the round goes on. Every report and recovery publishes the node's failure record
// (opaque JSON), so that every node can print the same job-wide summary from all of them.
//
// Rendezvous::failures() returns the rendezvous's own ledger: it works on the rendezvous's
// current round (next() must have returned one) and store.
//
// Thread safety: called from the thread that drives the Rendezvous (the agent's, or the in-place
// recovery's helper while the agent's waits in the supervisor's loop), never concurrently with
// the Rendezvous's own calls.
#pragma once

#include <string>
#include <vector>

#include "rendezvous/algorithm/rendezvous_types.hpp"

namespace ddp {

class FailureLedger {
 public:
  virtual ~FailureLedger() = default;

  // This node's workers failed. Publishes the record (opaque JSON, kept job-wide) and, unless the
  // round already ended, spends one restart of the job budget. Returns how the round ended:
  // kRestartRequested (a restart was granted, to this node's report or an earlier one of this
  // generation), kJobFailed (the budget is spent: every node sees kJobFailed), or the other cause
  // that ended the round first (kPeerLost, kScaleUp: nothing spent). The reporting node gets no
  // watch() event for this generation. Blocks up to closeTimeout when another node reported
  // first. Throws TimeoutError, NetworkError.
  virtual RendezvousEvent reportFailure(const std::string& failureRecordJson) = 0;
  // This node's workers failed and its agent judged restarting hopeless (launcher/agent/
  // verdict.hpp): as reportFailure(), except that when this report is the generation's first (the
  // one that would spend a restart) and the budget has a restart left, the job ends instead, with
  // `verdict` (one line) as its reason: kJobFailed with `verdict` set, on every node (and
  // JobEnded::verdict for a node that rejoins). With the budget spent, the job fails as after
  // reportFailure() (kJobFailed, `verdict` unset: the root cause's exit code). When the round had
  // already ended or another node reported first, that decision stands.
  // Blocks and throws as reportFailure().
  virtual RendezvousEvent reportVerdict(const std::string& failureRecordJson,
                                        const std::string& verdict) = 0;
  // This node's workers failed and are replaced in place (docs/recovery.md): the round goes on.
  // Spends one restart of the job budget and, when granted, publishes the record (kept job-wide,
  // like reportFailure's); every recovery counts, concurrent ones on different nodes each spend
  // one.
  // Returns RecoveryGranted, or RoundEnded: the round had already ended (nothing spent), or this
  // recovery found the budget spent (kJobFailed on every node). Throws NetworkError.
  virtual RecoveryResult recordRecovery(const std::string& failureRecordJson) = 0;
  // Every failure record published in this job, from every node, oldest first (empty before
  // next() attached to a job). One store read. Throws NetworkError.
  virtual std::vector<std::string> failureRecords() = 0;
};

}  // namespace ddp
