// RestartPolicy: what the agent does once a generation's workers stopped — a pure function of
// what happened, tested as a table (tests/launcher/recovery/restart_policy_test.cpp).
//
// The agent's loop is a small state machine: join a round, run the workers, then ask decide();
// an action that is a rendezvous call (the exit barrier, waiting for a peer's cause, reporting a
// failure) feeds its answer back into decide() until the decision is to rejoin or to exit.
//
//   situation            how the round ended      decision
//   workers succeeded    -                        await the exit barrier
//   exit barrier passed  -                        succeed (exit 0)
//   signalled            -                        exit 128 + signal (after leaving)
//   workers failed       - (own fault)            report the failure (spends a restart)
//   workers failed       - (own fault), and the   report the failure with the verdict
//                          job's failures repeat  (reportVerdict): the job ends instead of
//                          (verdict.hpp; only     restarting when this report is the
//                          with --verdict-after)  generation's first and the budget has a
//                                                 restart left (else the first's stands, or
//                                                 the spent budget ends the job as without one)
//   workers failed       - (all look like a       await the round's end for another cause,
//                          peer's collateral)     bounded by heartbeat_timeout + 3 keep-alives
//   peer cause awaited   none                     report the failure
//   peer cause awaited   peer lost / scale-up     rejoin; the local failures are collateral:
//                                                 not published, no restart spent
//   peer cause awaited   restart requested        report the failure (another node's report
//                                                 already spent this generation's restart)
//   round ended, or      scale-up / peer lost /   rejoin
//   failure reported     restart requested
//   any past the workers job failed               publish this node's record, print the job's
//                                                 summary (the same on every node), exit with
//                                                 its code; when this node was dropped from the
//                                                 round (declared lost, or away): next(), which
//                                                 reports the job's end and this node's part
//   any past the workers job failed by a verdict  the same, exit 87 (kVerdictExitCode) with the
//                        (restarts were left)     verdict naming the repeated cause in the
//                                                 summary's root cause (JobEnded::verdict too);
//                                                 with the budget spent: the root cause's code,
//                                                 the verdict a line of the summary
//   workers failed,      restart requested /      sit out (bad-node exclusion,
//   failure reported     peer lost / scale-up,    failure_window.hpp): leave the job for
//                        and this node's claim    --exclude-cooldown, then rejoin as a
//                        to leave was granted     newcomer
//   workers failed       - (a replacement in      sit out at once: the failure is recorded
//                          place was declined     (recordRecovery) and the others go on in
//                          for a granted claim)   place without this node
//   any                  store lost               exit 86 (kStoreLostExitCode) with this node's
//                                                 summary, the lost store its root cause; when the
//                                                 store was agent-hosted by another agent: fail
//                                                 over (store_failover.hpp), then rejoin: a peer
//                                                 loss, the local failures collateral, nothing
//                                                 spent
//
// In-place recovery (--restart-scope=failed, docs/recovery.md) decides first, when a worker
// fails while its generation runs (decideInPlace):
//
//   restart scope   workers that recover in place         decision
//   all             -                                      stop the group (the table above)
//   failed          fewer than the world size               stop the group (the table above),
//                   (a worker without worker_runtime)       with a note saying why
//   failed          all of them, but a worker already       stop the group (the table above): a
//                   finished (exited 0 on this node, or     replacement could never meet it again
//                   did its last step: the finished key)
//   failed          all of them, but the state is lost      stop the group (the table above): the
//                   (every process that held it died)       restart resumes from a checkpoint
//   failed          all of them                             replace the failed workers in place:
//                                                           FailureLedger::recordRecovery spends a
//                                                           restart; granted: a new quorum, new
//                                                           processes for the failed ranks; budget
//                                                           spent: the job fails (as above)
//
// Thread safety: pure functions over values.
#pragma once

#include <chrono>
#include <optional>
#include <string>
#include <vector>

#include "launcher/config/launch_config.hpp"
#include "launcher/failures/failure_summary.hpp"
#include "rendezvous/algorithm/rendezvous.hpp"

namespace ddp {

// ddprun's exit code when the rendezvous failed: a join timed out (this node withdrew), the
// store could not be reached or belongs to another run, or the job ended before this node ran any
// worker.
inline constexpr int kRendezvousFailedExitCode = 1;
// The job failed, but no worker's own failure explains it (every failed worker was one ddprun
// stopped): the rendezvous ended it — another client aborted it, an agent's verdict. The
// summary's root cause is the reason the rendezvous gives (job_summary.hpp). Outside the exit
// codes of worker_runtime (1-4), Python (1, 2), shells (126, 127), signals (128 + S) and
// torchrun (1).
inline constexpr int kJobEndedByRendezvousExitCode = 85;
// The rendezvous store stopped answering for heartbeat_timeout while this node was a member of a
// round (and no agent hosted it to fail over): the summary's root cause is the lost store.
inline constexpr int kStoreLostExitCode = 86;
// An agent's verdict stopped the job instead of restarting it while its restart budget had
// restarts left: the same failure, or no step progress, in --verdict-after generations in a row
// (verdict.hpp; opt-in, off by default). Every node exits with it, and the Slurm template does
// not requeue on it (docs/running.md "Exit codes").
inline constexpr int kVerdictExitCode = 87;

enum class Situation {
  kWorkersSucceeded,   // every local worker exited 0
  kWorkersFailed,      // a local worker failed; nothing reported yet
  kSignalled,          // ddprun got a handled signal; it was forwarded and the workers stopped
  kRoundEnded,         // the rendezvous ended the round (roundEnd says how)
  kPeerCauseAwaited,   // after awaiting another cause: roundEnd, or none within the bound
  kFailureReported,    // reportFailure() answered (roundEnd)
  kExitBarrierPassed,  // every node of the round succeeded
};

struct PolicyInput {
  Situation situation = Situation::kWorkersSucceeded;
  // How the round ended, when it did.
  std::optional<RendezvousEventKind> roundEnd;
  // kWorkersFailed: every failure ddprun did not cause itself is a communication failure
  // (isCommunicationFailure), which is what a lost peer does to healthy workers.
  bool allCommunicationFailures = false;
  // kWorkersFailed: the verdict on the job's failures with this node's (judgeGenerations,
  // verdict.hpp), one line; "" = none, or --verdict-after=0.
  std::string verdict;
  // The round's end is kJobFailed by an agent's verdict (RendezvousEvent::verdict).
  bool endedByVerdict = false;
  // This node is the round's only node: no peer's loss can explain its workers' communication
  // failures, so they are reported at once instead of waiting for a peer to be noticed.
  bool aloneInRound = false;
  // kSignalled: the signal.
  int signal = 0;
  // The round's end names this node as lost, or its keys were gone (this node was away): the
  // job went on without it, and next() reports how it ended and this node's part in it.
  bool droppedFromRound = false;
  // The job-wide restart budget as of this generation (for the decision's log line; the store
  // decides atomically whether a report gets a restart).
  int restartsUsed = 0;
  int maxRestarts = 0;
  // The store is hosted by another agent of this job, which the survivors replace when it dies
  // (StoreFailover::enabled()).
  bool storeFailover = false;
  // Bad-node exclusion (failure_window.hpp): the reason of this node's granted claim to leave the
  // job for a cooldown ("" = none), and whether its failure is recorded already (the in-place
  // path declined a replacement for it and recorded it).
  std::string sitOut;
  bool sitOutRecorded = false;
};

enum class Action {
  kAwaitExitBarrier,  // Rendezvous::exitBarrier()
  kAwaitPeerCause,    // Rendezvous::awaitRoundEnd(heartbeat timeout + 3 keep-alives)
  kReportFailure,     // FailureLedger::reportFailure(this node's record)
  kReportVerdict,     // FailureLedger::reportVerdict(this node's record, PolicyInput::verdict)
  kRejoin,            // Rendezvous::next(): the next round, or how the job ended
  kJobFailed,         // the job failed: publish this node's record, print the summary, exit
                      // with its code (exitCode 0: the root cause's; else exitCode, the verdict's)
  kSucceed,           // leave the job; exit 0
  kExit,              // exit with exitCode (leaving first when `leave`)
  kFailOver,          // the store was lost with its host: move it (store_failover.hpp), rejoin
  kSitOut,            // leave the job for --exclude-cooldown (ExclusionBoard::sitOut), then rejoin
};

struct Decision {
  Action action = Action::kRejoin;
  int exitCode = 0;            // kExit; kJobFailed: 0, or kVerdictExitCode
  bool leave = false;          // kExit: leave the rendezvous first (the store still answers)
  bool collateral = false;     // kRejoin after failures that were a peer's collateral damage
  std::string verdict;         // kReportVerdict: the verdict's line (PolicyInput::verdict)
  std::string why;             // one line for the log
};

Decision decide(const PolicyInput& input);

struct InPlaceInput {
  RestartScope scope = RestartScope::kAll;
  int64_t workersInPlace = 0;  // the generation's in_place counter (worker_store_keys.hpp)
  int worldSize = 1;
  bool workerFinished = false;  // a worker of this node exited 0, or one of the job finished its
                                // last step (worker_store_keys.hpp's finished key)
  bool stateLost = false;       // a worker found no rank holding the state (worker_store_keys)
};

struct InPlaceDecision {
  bool replace = false;
  std::string why;  // one line: why not, or what is done
};

InPlaceDecision decideInPlace(const InPlaceInput& input);

// PolicyInput::allCommunicationFailures for a generation's failures: every failure ddprun did not
// cause itself (stoppedByAgent) is a communication failure, and there is at least one.
bool allCommunicationFailures(const std::vector<WorkerFailure>& failures);

// How long kAwaitPeerCause waits: heartbeat_timeout (keep_alive_interval x keep_alive_max_attempt
// when unset) plus three keep-alive intervals (an observer sees a dead peer's last heartbeat up
// to one tick late, checks once per tick, and its ticks drift by their own duration).
std::chrono::milliseconds peerCauseBound(const RendezvousSettings& settings);

}  // namespace ddp
