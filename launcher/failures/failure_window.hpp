// Bad-node exclusion: when this node's own workers failed --exclude-after times within
// --exclude-window, its agent leaves the node out of the job for --exclude-cooldown instead of
// putting it back into the next round (docs/running.md "Bad-node exclusion"; Horovod's host
// blacklist, NVRx's and DLRover's node exclusion).
//
// What counts: one failure per generation (or per replacement in place) in which a worker of this
// node failed by itself — not one ddprun stopped, not one ended by SIGTERM, SIGINT or SIGHUP
// (pre-emption, the user), not a hang waiting for peers, not an exit with a communication error (a
// lost peer's collateral). Any other signal counts, whatever the worker's stderr said before. Times are this agent's monotonic clock; nothing is compared across nodes.
//
// Whether the node may leave is the rendezvous's decision (ExclusionBoard::claim: the round
// keeps min_nodes, counting the spares that wait), so a fixed-size job without a spare never
// excludes itself to death; a refused claim is logged and the node rejoins.
//
// Thread safety: none; the agent's thread only.
#pragma once

#include <chrono>
#include <deque>
#include <optional>
#include <string>
#include <vector>

#include "launcher/failures/failure_summary.hpp"

namespace ddp {

struct ExclusionSettings {
  int after = 0;                                            // --exclude-after; 0 = never
  std::chrono::milliseconds window{std::chrono::minutes(10)};    // --exclude-window
  std::chrono::milliseconds cooldown{std::chrono::minutes(10)};  // --exclude-cooldown
};

// True when `failure` counts against its node (see above).
bool countsAgainstNode(const WorkerFailure& failure);

// This node's failures within the window.
class FailureWindow {
 public:
  using Clock = std::chrono::steady_clock;
  explicit FailureWindow(ExclusionSettings settings) : settings_(settings) {}

  // A generation (or a replacement in place) ended with `failures` at `now`: counts it when one
  // of them counts against the node. Returns the exclusion's reason when this failure makes
  // --exclude-after within --exclude-window (one line, naming the count, the window and the
  // last failure), else nullopt. Never with --exclude-after 0.
  std::optional<std::string> record(const std::vector<WorkerFailure>& failures,
                                    Clock::time_point now);
  // The node left and came back, or its claim was refused: counting starts again.
  void clear() { times_.clear(); }
  const ExclusionSettings& settings() const { return settings_; }

 private:
  ExclusionSettings settings_;
  std::deque<Clock::time_point> times_;  // at most settings_.after entries
};

}  // namespace ddp
