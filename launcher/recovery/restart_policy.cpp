#include "launcher/recovery/restart_policy.hpp"

#include <algorithm>

namespace ddp {

namespace {

Decision act(Action action, std::string why) {
  Decision d;
  d.action = action;
  d.why = std::move(why);
  return d;
}

Decision exitWith(int code, bool leave, std::string why) {
  Decision d = act(Action::kExit, std::move(why));
  d.exitCode = code;
  d.leave = leave;
  return d;
}

std::string budget(const PolicyInput& in) {
  return std::to_string(in.restartsUsed) + " of " + std::to_string(in.maxRestarts) +
         " restarts used";
}

// The round ended for `kind`: what every situation past the workers' own outcome does with it.
// A job that failed while this node was a member of its round: this node publishes its record
// (its workers' failures, or that they were stopped) and prints the job-wide summary, like every
// other node of the round, so all print the same table.
Decision afterRoundEnd(RendezvousEventKind kind, const PolicyInput& in) {
  switch (kind) {
    case RendezvousEventKind::kScaleUp:
      return act(Action::kRejoin, "a node waits to join: rejoining (free, " + budget(in) + ")");
    case RendezvousEventKind::kPeerLost:
      return act(Action::kRejoin, "a node was lost or left: rejoining (free, " + budget(in) + ")");
    case RendezvousEventKind::kRestartRequested:
      return act(Action::kRejoin, "workers failed: restarting the job");
    case RendezvousEventKind::kJobFailed:
      if (in.endedByVerdict && !in.droppedFromRound) {
        Decision d = act(Action::kJobFailed, "the job's failures repeat: a verdict stopped the job "
                                             "instead of restarting it");
        d.exitCode = kVerdictExitCode;
        return d;
      }
      if (in.droppedFromRound) {
        return act(Action::kRejoin, "the job failed after this node was dropped: next() reports "
                                    "how, and this node's part");
      }
      if (in.situation == Situation::kFailureReported) {
        return act(Action::kJobFailed, "this node's failure spent the job's restart budget");
      }
      return act(Action::kJobFailed, "the job failed: publishing this node's record and "
                                     "printing the job's summary");
    case RendezvousEventKind::kStoreLost:
      if (in.storeFailover) {
        Decision d = act(Action::kFailOver, "the rendezvous store was lost with the agent hosting "
                                            "it: moving it to the lowest surviving node");
        d.collateral = true;
        return d;
      }
      return exitWith(kStoreLostExitCode, false, "the rendezvous store was lost");
  }
  return exitWith(kRendezvousFailedExitCode, false, "unknown rendezvous event");
}

Decision afterPeerCause(const PolicyInput& in) {
  if (!in.roundEnd) {
    return act(Action::kReportFailure, "no other cause ended the round: the failure is this "
                                       "node's own");
  }
  switch (*in.roundEnd) {
    case RendezvousEventKind::kScaleUp:
    case RendezvousEventKind::kPeerLost: {
      Decision d = afterRoundEnd(*in.roundEnd, in);
      d.collateral = true;
      d.why = "the workers' communication failures followed the round's end: collateral, not "
              "counted (" + budget(in) + ")";
      return d;
    }
    case RendezvousEventKind::kRestartRequested:
      return act(Action::kReportFailure, "another node reported a failure first; recording this "
                                         "node's too");
    case RendezvousEventKind::kJobFailed:
    case RendezvousEventKind::kStoreLost:
      return afterRoundEnd(*in.roundEnd, in);
  }
  return afterRoundEnd(*in.roundEnd, in);
}

}  // namespace

Decision decide(const PolicyInput& in) {
  switch (in.situation) {
    case Situation::kWorkersSucceeded:
      return act(Action::kAwaitExitBarrier, "every local worker succeeded");
    case Situation::kExitBarrierPassed:
      return act(Action::kSucceed, "every node succeeded");
    case Situation::kSignalled:
      return exitWith(128 + in.signal, true, "stopped by a signal");
    case Situation::kWorkersFailed:
      if (!in.sitOut.empty() && in.sitOutRecorded) {  // its failure counted: no peer's collateral
        return act(Action::kSitOut, "this node's workers keep failing: it leaves the job for a "
                                    "cooldown, the others go on in place (" + in.sitOut + ")");
      }
      if (in.allCommunicationFailures && !in.aloneInRound) {
        return act(Action::kAwaitPeerCause, "every local failure is a communication failure: "
                                            "waiting for a lost peer to be noticed");
      }
      if (!in.verdict.empty()) {
        Decision d = act(Action::kReportVerdict, "workers failed on this node, and the job's "
                                                 "failures repeat: " + in.verdict);
        d.verdict = in.verdict;
        return d;
      }
      return act(Action::kReportFailure, "workers failed on this node");
    case Situation::kPeerCauseAwaited:
      return afterPeerCause(in);
    case Situation::kRoundEnded:
    case Situation::kFailureReported:
      if (!in.roundEnd) {
        return exitWith(kRendezvousFailedExitCode, false, "the round ended without a reason");
      }
      if (in.situation == Situation::kFailureReported && !in.sitOut.empty()) {
        const Decision d = afterRoundEnd(*in.roundEnd, in);
        if (d.action == Action::kRejoin && !in.droppedFromRound) {
          return act(Action::kSitOut, "this node's workers keep failing: it leaves the job for a "
                                      "cooldown, then rejoins (" + in.sitOut + ")");
        }
        return d;
      }
      return afterRoundEnd(*in.roundEnd, in);
  }
  return exitWith(kRendezvousFailedExitCode, false, "unknown situation");
}

bool allCommunicationFailures(const std::vector<WorkerFailure>& failures) {
  bool any = false;
  for (const auto& f : failures) {
    if (f.stoppedByAgent) continue;
    if (!isCommunicationFailure(f)) return false;
    any = true;
  }
  return any;
}

std::chrono::milliseconds peerCauseBound(const RendezvousSettings& s) {
  const auto heartbeat = s.heartbeatTimeout.count() > 0
                             ? s.heartbeatTimeout
                             : s.keepAliveInterval * std::max(s.keepAliveMaxAttempt, 1);
  return heartbeat + 3 * s.keepAliveInterval;
}

InPlaceDecision decideInPlace(const InPlaceInput& in) {
  if (in.scope == RestartScope::kAll) {
    return {false, "restart scope all: no worker is replaced in place"};
  }
  if (in.workersInPlace < in.worldSize) {
    return {false, "restart scope failed, but " + std::to_string(in.workersInPlace) + " of " +
                       std::to_string(in.worldSize) +
                       " workers recover in place (a worker must build its communicator with "
                       "worker_runtime or ddprun.torch first; a PyTorch script without "
                       "ddprun.torch does not): no worker is replaced in place"};
  }
  if (in.stateLost) {
    return {false, "restart scope failed, but the training state was lost with every process that "
                   "held it: no worker is replaced in place (a restart resumes from the last "
                   "checkpoint, if any)"};
  }
  if (in.workerFinished) {
    return {false, "restart scope failed, but a worker already finished the job (exited 0 or did "
                   "its last step) and a replacement could not train with it again: no worker is "
                   "replaced in place"};
  }
  return {true, "every worker recovers in place: the failed ones are replaced, the others keep "
                "running"};
}

}  // namespace ddp
