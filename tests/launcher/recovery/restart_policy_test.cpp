// The restart policy, exhaustively: every situation x every way a round can end (or none) x
// whether the local failures all look like a peer's collateral, whether the job's failures repeat
// (a verdict) and whether a verdict ended the round, against the table in
// launcher/recovery/restart_policy.hpp.
#include <catch2/catch.hpp>

#include <csignal>
#include <optional>
#include <vector>

#include "launcher/recovery/restart_policy.hpp"

using namespace ddp;
using Kind = RendezvousEventKind;

namespace {

const std::vector<Situation> kSituations = {
    Situation::kWorkersSucceeded, Situation::kWorkersFailed,    Situation::kSignalled,
    Situation::kRoundEnded,       Situation::kPeerCauseAwaited, Situation::kFailureReported,
    Situation::kExitBarrierPassed};

const std::vector<std::optional<Kind>> kEnds = {
    std::nullopt,       Kind::kScaleUp,  Kind::kPeerLost, Kind::kRestartRequested,
    Kind::kJobFailed,   Kind::kStoreLost};

struct Expected {
  Action action;
  int exitCode = 0;
  bool collateral = false;
};

// The table, written out independently of the implementation.
Expected expected(Situation s, std::optional<Kind> end, bool allComm, bool dropped,
                  bool failover, bool alone, bool verdict, bool byVerdict) {
  auto afterEnd = [&](bool collateral) -> Expected {
    switch (*end) {
      case Kind::kScaleUp:
      case Kind::kPeerLost:
        return {Action::kRejoin, 0, collateral};
      case Kind::kRestartRequested:
        return {Action::kRejoin};
      case Kind::kJobFailed:  // every member prints the job's summary; a dropped node asks next()
        if (dropped) return {Action::kRejoin};
        return {Action::kJobFailed, byVerdict ? kVerdictExitCode : 0};
      case Kind::kStoreLost:  // with its agent host: move it, nothing spent
        if (failover) return {Action::kFailOver, 0, true};
        return {Action::kExit, kStoreLostExitCode};
    }
    return {Action::kExit, kRendezvousFailedExitCode};
  };
  switch (s) {
    case Situation::kWorkersSucceeded:
      return {Action::kAwaitExitBarrier};
    case Situation::kExitBarrierPassed:
      return {Action::kSucceed};
    case Situation::kSignalled:
      return {Action::kExit, 128 + SIGTERM};
    case Situation::kWorkersFailed:
      if (allComm && !alone) return {Action::kAwaitPeerCause};
      return {verdict ? Action::kReportVerdict : Action::kReportFailure};
    case Situation::kPeerCauseAwaited:
      if (!end || *end == Kind::kRestartRequested) return {Action::kReportFailure};
      return afterEnd(true);
    case Situation::kRoundEnded:
    case Situation::kFailureReported:
      if (!end) return {Action::kExit, kRendezvousFailedExitCode};
      return afterEnd(false);
  }
  return {Action::kExit, -1};
}

}  // namespace

TEST_CASE("the restart policy, every row of the table", "[restart_policy]") {
  int rows = 0;
  for (Situation s : kSituations) {
    for (const auto& end : kEnds) {
      for (int bits = 0; bits < 64; ++bits) {
        const bool allComm = (bits & 1) != 0;
        const bool dropped = (bits & 2) != 0;
        const bool failover = (bits & 4) != 0;
        const bool alone = (bits & 8) != 0;
        const bool verdict = (bits & 16) != 0;
        const bool byVerdict = (bits & 32) != 0;
        PolicyInput in;
        in.situation = s;
        in.roundEnd = end;
        in.allCommunicationFailures = allComm;
        in.droppedFromRound = dropped;
        in.signal = SIGTERM;
        in.restartsUsed = 1;
        in.maxRestarts = 3;
        in.storeFailover = failover;
        in.aloneInRound = alone;
        if (verdict) in.verdict = "the same failure in 3 generations in a row: rank 1 exit 1";
        in.endedByVerdict = byVerdict;
        const Decision d = decide(in);
        const Expected want =
            expected(s, end, allComm, dropped, failover, alone, verdict, byVerdict);
        INFO("situation " << static_cast<int>(s) << ", end "
                          << (end ? static_cast<int>(*end) : -1) << ", allComm " << allComm
                          << ", dropped " << dropped << ", failover " << failover
                          << ", alone " << alone << ", verdict " << verdict << ", by verdict "
                          << byVerdict);
        CHECK(d.action == want.action);
        if (want.action == Action::kExit || want.action == Action::kJobFailed) {
          CHECK(d.exitCode == want.exitCode);
        }
        if (want.action == Action::kReportVerdict) CHECK(d.verdict == in.verdict);
        CHECK(d.collateral == want.collateral);
        CHECK_FALSE(d.why.empty());
        ++rows;
      }
    }
  }
  CHECK(rows == 7 * 6 * 64);
}

TEST_CASE("restart policy: a verdict stops the job instead of restarting it", "[restart_policy]") {
  PolicyInput in;
  in.situation = Situation::kWorkersFailed;
  in.maxRestarts = 10;  // budget left: the verdict, not the budget, ends the job
  in.verdict = "the same failure in 3 generations in a row: rank 1 exit 1 'x' at step 3; stopping "
               "instead of restarting";
  const Decision report = decide(in);
  CHECK(report.action == Action::kReportVerdict);
  CHECK(report.verdict == in.verdict);
  CHECK_THAT(report.why, Catch::Contains(in.verdict));
  // Communication failures wait for a lost peer first, verdict or not: a node loss never fires it.
  in.allCommunicationFailures = true;
  CHECK(decide(in).action == Action::kAwaitPeerCause);
  // The rendezvous answered kJobFailed by the verdict: every node exits 87 with the summary.
  for (Situation s : {Situation::kFailureReported, Situation::kRoundEnded,
                      Situation::kPeerCauseAwaited}) {
    PolicyInput end;
    end.situation = s;
    end.roundEnd = Kind::kJobFailed;
    end.endedByVerdict = true;
    CHECK(decide(end).action == Action::kJobFailed);
    CHECK(decide(end).exitCode == kVerdictExitCode);
    // Without the verdict: the summary's root cause gives the code.
    end.endedByVerdict = false;
    CHECK(decide(end).exitCode == 0);
  }
  // Another node's report came first and was granted a restart: the verdict does not stand.
  in.allCommunicationFailures = false;
  in.situation = Situation::kFailureReported;
  in.roundEnd = Kind::kRestartRequested;
  CHECK(decide(in).action == Action::kRejoin);
  // 87 is none of the codes a worker, a shell, a signal or ddprun itself uses.
  for (int code : {1, 2, 3, 4, 126, 127, kJobEndedByRendezvousExitCode, kStoreLostExitCode}) {
    CHECK(kVerdictExitCode != code);
  }
  CHECK(kVerdictExitCode < 128);
}

TEST_CASE("restart policy: the decisions that matter most, spelled out", "[restart_policy]") {
  PolicyInput in;
  // A lost peer's collateral damage costs nothing, even with --max-restarts=0.
  in.situation = Situation::kWorkersFailed;
  in.allCommunicationFailures = true;
  in.maxRestarts = 0;
  CHECK(decide(in).action == Action::kAwaitPeerCause);
  in.situation = Situation::kPeerCauseAwaited;
  in.roundEnd = Kind::kPeerLost;
  const Decision collateral = decide(in);
  CHECK(collateral.action == Action::kRejoin);
  CHECK(collateral.collateral);
  // Nobody else ended the round: the failure is this node's own and is reported.
  in.roundEnd.reset();
  CHECK(decide(in).action == Action::kReportFailure);
  // A worker's own fault is reported at once.
  in.situation = Situation::kWorkersFailed;
  in.allCommunicationFailures = false;
  CHECK(decide(in).action == Action::kReportFailure);
  // So are communication failures in a one-node round: there is no peer to wait for.
  in.allCommunicationFailures = true;
  in.aloneInRound = true;
  CHECK(decide(in).action == Action::kReportFailure);
  in.aloneInRound = false;
  // Signals leave the rendezvous first (the store still answers); a lost store does not.
  in.situation = Situation::kSignalled;
  in.signal = SIGINT;
  CHECK(decide(in).exitCode == 130);
  CHECK(decide(in).leave);
  in.situation = Situation::kRoundEnded;
  in.roundEnd = Kind::kStoreLost;
  CHECK_FALSE(decide(in).leave);
  // A store hosted by another agent moves to a survivor: the job goes on, nothing spent.
  in.storeFailover = true;
  CHECK(decide(in).action == Action::kFailOver);
  in.situation = Situation::kPeerCauseAwaited;
  CHECK(decide(in).action == Action::kFailOver);
  CHECK(decide(in).collateral);
}

TEST_CASE("restart policy inputs: collateral failures and the peer-cause bound", "[restart_policy]") {
  WorkerFailure gloo;
  gloo.exitCode = 1;
  gloo.stderrTail = {"RuntimeError: [pair.cc:598] Connection closed by peer [10.0.0.2]:41234"};
  WorkerFailure stopped;
  stopped.signal = SIGTERM;
  stopped.stoppedByAgent = true;
  WorkerFailure own;
  own.exitCode = 7;
  CHECK(allCommunicationFailures({gloo, stopped}));  // ddprun's own SIGTERM does not count
  CHECK_FALSE(allCommunicationFailures({gloo, own}));
  CHECK_FALSE(allCommunicationFailures({stopped}));  // nothing failed by itself
  CHECK_FALSE(allCommunicationFailures({}));
  RendezvousSettings s;
  s.keepAliveInterval = std::chrono::milliseconds(500);
  s.keepAliveMaxAttempt = 3;
  CHECK(peerCauseBound(s) == std::chrono::milliseconds(3000));  // 1.5 s + 3 x 0.5 s
  s.heartbeatTimeout = std::chrono::seconds(3);
  CHECK(peerCauseBound(s) == std::chrono::milliseconds(4500));
}
