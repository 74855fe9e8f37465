// StragglerWatch: this node's side of straggler detection (docs/running.md "Straggler
// detection") — each local rank's compute time per step, from its progress beats, and its
// straggler verdict against the job's median (straggler_judge.hpp has the rule).
//
// The agent's HangMonitor hands it the beats that carry "compute_s" (launcher/hang/, on the
// supervisor's io thread); the StatusPublisher (launcher/status/, on its own thread) asks for the
// figures once per tick, publishes them in this node's status record, learns the job's median
// (node rank 0 computes it over every node's record) and has the ranks judged, logging each change.
//
// A rank's figure is the median of the beats it sent in the last `window` (each beat is the mean
// of the steps since the one before it, worker_runtime/progress.hpp), at most kMaxBeats of them —
// beats come at most every 100 ms, so the bound only shortens windows over 100 s. Memory is
// O(local ranks x kMaxBeats); a figure costs O(beats) (std::nth_element).
//
// Thread safety: thread-safe (one mutex); no call blocks on anything but that mutex.
#pragma once

#include <chrono>
#include <cstddef>
#include <deque>
#include <mutex>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "launcher/straggler/straggler_judge.hpp"

namespace ddp {

class StragglerWatch {
 public:
  using Clock = std::chrono::steady_clock;
  static constexpr std::size_t kMaxBeats = 1024;

  explicit StragglerWatch(StragglerRule rule) : rule_(rule) {}
  const StragglerRule& rule() const { return rule_; }

  // A generation with `localWorldSize` workers starts: every figure and verdict starts afresh.
  void startGeneration(int localWorldSize);
  // Local rank `lr` exited, or runs a new process (replaced in place): its figure and verdict
  // start afresh (a flag does not outlive the process it was about).
  void forget(int lr);
  // A beat of local rank `lr`: `computeS` seconds per step. Ignored for an unknown `lr`.
  void beat(int lr, double computeS, Clock::time_point now);

  // Per local rank, its figure at `now` (nullopt: no beat in the window). Drops older beats.
  std::vector<std::optional<double>> figures(Clock::time_point now);

  struct Judged {
    std::vector<bool> flagged;       // per local rank, after this judgement
    std::vector<std::string> lines;  // one per change (stragglerLine / recoveredLine)
    std::vector<bool> lineIsFlag;    // per line: flagged (true) or recovered
  };
  // Judges every local rank: `figures` from figures(), `ranks[lr]` its global rank (for the
  // lines), `jobMedianS` the job's median (nullopt: not known yet — nothing changes).
  Judged judge(const std::vector<std::optional<double>>& figures, std::optional<double> jobMedianS,
               const std::vector<int>& ranks, Clock::time_point now);

 private:
  struct Rank {
    std::deque<std::pair<Clock::time_point, double>> beats;  // oldest first
    StragglerState state;
  };
  const StragglerRule rule_;
  std::mutex mutex_;
  // Guarded by mutex_.
  std::vector<Rank> ranks_;
};

}  // namespace ddp
