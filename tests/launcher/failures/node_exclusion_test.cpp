// Bad-node exclusion in the agent (launcher/failures/failure_window.hpp, restart_policy.hpp's sit-out
// rows): what counts against a node, the window, and the decisions that lead to sitting out.
#include <catch2/catch.hpp>

#include <csignal>

#include "launcher/failures/failure_window.hpp"
#include "launcher/recovery/restart_policy.hpp"

using namespace ddp;
using namespace std::chrono_literals;

namespace {

WorkerFailure exited(int code) {
  WorkerFailure f;
  f.rank = 1;
  f.exitCode = code;
  return f;
}

WorkerFailure signalled(int signal) {
  WorkerFailure f;
  f.rank = 1;
  f.signal = signal;
  return f;
}

}  // namespace

TEST_CASE("exclusion: what counts against a node", "[exclusion]") {
  CHECK(countsAgainstNode(exited(1)));
  CHECK(countsAgainstNode(signalled(SIGSEGV)));
  CHECK(countsAgainstNode(signalled(SIGKILL)));  // the OOM killer on this node
  CHECK_FALSE(countsAgainstNode(signalled(SIGTERM)));  // pre-emption, the user
  CHECK_FALSE(countsAgainstNode(exited(128 + SIGINT)));
  CHECK_FALSE(countsAgainstNode(exited(3)));  // worker_runtime's communication failure
  WorkerFailure stopped = exited(1);
  stopped.stoppedByAgent = true;
  CHECK_FALSE(countsAgainstNode(stopped));
  WorkerFailure peer = exited(1);
  peer.stderrTail = {"RuntimeError: Connection reset by peer"};
  CHECK_FALSE(countsAgainstNode(peer));
  // A worker SIGKILLed after it had recovered from a peer's failure (its stderr says so) counts.
  WorkerFailure killed = signalled(SIGKILL);
  killed.stderrTail = peer.stderrTail;
  CHECK(countsAgainstNode(killed));
  WorkerFailure hung = exited(1);
  hung.hang = "no progress for 60 s";
  CHECK(countsAgainstNode(hung));
  hung.waitsForPeer = true;  // hung waiting for a peer: the peer's fault
  CHECK_FALSE(countsAgainstNode(hung));
}

TEST_CASE("exclusion: N failures within the window, on this agent's clock", "[exclusion]") {
  FailureWindow w(ExclusionSettings{3, 60s, 600s});
  const auto t0 = FailureWindow::Clock::time_point{} + 1000s;
  CHECK_FALSE(w.record({exited(1)}, t0));
  CHECK_FALSE(w.record({signalled(SIGTERM)}, t0 + 1s));  // does not count
  CHECK_FALSE(w.record({exited(1)}, t0 + 30s));
  CHECK_FALSE(w.record({exited(1)}, t0 + 61s));  // the first fell out of the window
  const auto why = w.record({exited(2), exited(1)}, t0 + 70s);
  REQUIRE(why);
  CHECK_THAT(*why, Catch::Contains("3 failure(s)") && Catch::Contains("60 s") &&
                       Catch::Contains("rank 1 exit 1"));
  w.clear();
  CHECK_FALSE(w.record({exited(1)}, t0 + 71s));
  FailureWindow off(ExclusionSettings{0, 60s, 600s});
  for (int i = 0; i < 10; ++i) CHECK_FALSE(off.record({exited(1)}, t0));
}

TEST_CASE("restart policy: a node granted its claim sits out instead of rejoining",
          "[exclusion][restart_policy]") {
  PolicyInput in;
  in.situation = Situation::kFailureReported;
  in.sitOut = "3 failure(s) of this node's workers within 600 s";
  for (auto end : {RendezvousEventKind::kRestartRequested, RendezvousEventKind::kPeerLost,
                   RendezvousEventKind::kScaleUp}) {
    in.roundEnd = end;
    const Decision d = decide(in);
    CHECK(d.action == Action::kSitOut);
    CHECK_THAT(d.why, Catch::Contains(in.sitOut));
  }
  // The job failed (budget spent, a verdict) or the store was lost: that decision stands.
  in.roundEnd = RendezvousEventKind::kJobFailed;
  CHECK(decide(in).action == Action::kJobFailed);
  in.roundEnd = RendezvousEventKind::kStoreLost;
  CHECK(decide(in).action == Action::kExit);
  // Dropped from the round meanwhile: next() says how the job went on.
  in.roundEnd = RendezvousEventKind::kPeerLost;
  in.droppedFromRound = true;
  CHECK(decide(in).action == Action::kRejoin);
  // Workers failed: the failure is reported first (a restart for the others) ...
  PolicyInput failed;
  failed.situation = Situation::kWorkersFailed;
  failed.sitOut = in.sitOut;
  CHECK(decide(failed).action == Action::kReportFailure);
  // ... unless the in-place path recorded it already: then the node leaves at once.
  failed.sitOutRecorded = true;
  CHECK(decide(failed).action == Action::kSitOut);
  failed.allCommunicationFailures = true;  // the other local workers' errors follow its failure
  CHECK(decide(failed).action == Action::kSitOut);
  // Without a granted claim nothing changes.
  PolicyInput plain;
  plain.situation = Situation::kFailureReported;
  plain.roundEnd = RendezvousEventKind::kRestartRequested;
  CHECK(decide(plain).action == Action::kRejoin);
}
