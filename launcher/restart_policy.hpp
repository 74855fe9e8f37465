// RestartPolicy: what the agent does once a generation's workers stopped — a pure function of
// what happened, tested as a table (tests/launcher/restart_policy_test.cpp).
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
//   any                  store lost               exit 1 (the rendezvous failed); when the store
//                                                 was agent-hosted by another agent: fail over
//                                                 (store_failover.hpp), then rejoin: a peer loss,
//                                                 the local failures collateral, nothing spent
//
// Thread safety: pure functions over values.
#pragma once

#include <chrono>
#include <optional>
#include <string>
#include <vector>

#include "launcher/failure_summary.hpp"
#include "rendezvous/algorithm/rendezvous.hpp"

namespace ddp {

// ddprun's exit code when the rendezvous failed: a join timed out (this node withdrew), the
// store was lost or belongs to another run, or the job ended before this node ran any worker.
inline constexpr int kRendezvousFailedExitCode = 1;

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
};

enum class Action {
  kAwaitExitBarrier,  // Rendezvous::exitBarrier()
  kAwaitPeerCause,    // Rendezvous::awaitRoundEnd(heartbeat timeout + 3 keep-alives)
  kReportFailure,     // Rendezvous::reportFailure(this node's record)
  kRejoin,            // Rendezvous::next(): the next round, or how the job ended
  kJobFailed,         // the job failed: publish this node's record, print the summary, exit
                      // with its code
  kSucceed,           // leave the job; exit 0
  kExit,              // exit with exitCode (leaving first when `leave`)
  kFailOver,          // the store was lost with its host: move it (store_failover.hpp), rejoin
};

struct Decision {
  Action action = Action::kRejoin;
  int exitCode = 0;            // kExit
  bool leave = false;          // kExit: leave the rendezvous first (the store still answers)
  bool collateral = false;     // kRejoin after failures that were a peer's collateral damage
  std::string why;             // one line for the log
};

Decision decide(const PolicyInput& input);

// PolicyInput::allCommunicationFailures for a generation's failures: every failure ddprun did not
// cause itself (stoppedByAgent) is a communication failure, and there is at least one.
bool allCommunicationFailures(const std::vector<WorkerFailure>& failures);

// How long kAwaitPeerCause waits: heartbeat_timeout (keep_alive_interval x keep_alive_max_attempt
// when unset) plus three keep-alive intervals (an observer sees a dead peer's last heartbeat up
// to one tick late, checks once per tick, and its ticks drift by their own duration).
std::chrono::milliseconds peerCauseBound(const RendezvousSettings& settings);

}  // namespace ddp
