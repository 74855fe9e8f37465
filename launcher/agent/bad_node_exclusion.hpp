// BadNodeExclusion: this node's side of bad-node exclusion (docs/running.md#bad-node-exclusion;
// the rule and what counts: launcher/failures/failure_window.hpp). It counts the node's failures
// in a FailureWindow, claims to leave the job through the rendezvous when they reach
// --exclude-after, and remembers what the agent needs of a claim: the reason of this generation's
// granted claim, whether it was recorded already (the in-place path reports the failure itself),
// and whether the node sat out and has not been a member of a round since.
//
// Whether the node may leave is the rendezvous's decision (ExclusionBoard::claim); an
// explicit --node-rank that is not the round's last keeps the node (the others could not form a
// round without it).
//
// Thread safety: firstStragglerClaim() and the const methods from any thread; the rest from the
// agent's thread, or InPlaceRecovery's helper thread while the agent's thread is in the
// supervisor's loop (never both at once). A straggler's claim, made on the status publisher's
// thread, is recorded through the supervisor's post(), on the agent's.
#pragma once

#include <atomic>
#include <chrono>
#include <cstdint>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "launcher/config/launch_config.hpp"
#include "launcher/failures/failure_summary.hpp"
#include "launcher/failures/failure_window.hpp"
#include "rendezvous/algorithm/rendezvous.hpp"

namespace spdlog {
class logger;
}

namespace ddp {

class BadNodeExclusion {
 public:
  // `host`: this node's, for the exclusion's record.
  BadNodeExclusion(const LaunchConfig& config, std::string host);

  // Counts `failures` of `round` against the node; when they reach --exclude-after within the
  // window, claims to leave through `rdzv`: the reason when granted, else "" (a refused claim is
  // logged and the node stays). At most one store call; throws what claimExclusion throws.
  std::string countFailure(Rendezvous& rdzv, const std::vector<WorkerFailure>& failures,
                           const RendezvousResult& round);
  // True (logged, `what` first) when an explicit --node-rank keeps this node in the job.
  bool rankKeepsNode(int nodeCount, const std::string& what) const;
  // The job's record of this node leaving: this process, --exclude-cooldown, the wall time now.
  NodeExclusion record(int nodeRank, int64_t generation, const std::string& why) const;

  // This generation's granted claim: `why` ("" = none); `recorded`: its failure is reported
  // already (or nothing failed), so the agent must not report it again.
  void leave(std::string why, bool recorded) {
    leaving_ = std::move(why);
    recorded_ = recorded;
  }
  const std::string& leaving() const { return leaving_; }
  bool recorded() const { return recorded_; }
  // A new generation starts: no claim yet.
  void beginGeneration() { leave("", false); }
  // The node sat out its cooldown: counting starts again, and the next round it joins marks its
  // return (takeReturn()).
  void satOut() {
    window_.clear();
    returning_ = true;
  }
  // True once after satOut(): the round just joined is the node's return.
  bool takeReturn() { return std::exchange(returning_, false); }
  // --exclude-stragglers claims once per generation: true the first time for `generation`. Any
  // thread (the status publisher's).
  bool firstStragglerClaim(int64_t generation) {
    return stragglerClaimed_.exchange(generation) != generation;
  }

 private:
  const LaunchConfig& config_;
  const std::string host_;
  std::shared_ptr<spdlog::logger> log_;
  FailureWindow window_;
  std::string leaving_;
  bool recorded_ = false;
  bool returning_ = false;
  std::atomic<int64_t> stragglerClaimed_{-1};  // the generation a straggler claim was made in
};

}  // namespace ddp
