// Straggler judgement (docs/running.md "Straggler detection"): the decisions, as pure functions
// over values — which rank computes too slowly against the job, and when that starts and ends.
// StragglerWatch (straggler_watch.hpp) keeps the state and feeds it; tests drive it without sleeping.
//
// Figures are compute seconds per step: the part of a step a rank spends on its own work, not
// waiting for its peers (worker_runtime/progress.hpp). In synchronous data-parallel training the
// wall time of a step is the same on every rank — the allreduce waits for the slowest — so only
// the compute time tells the slow rank apart.
//
// The rule, with threshold X (> 1) and window W:
//   * a rank is *over* when its figure is more than X times the job's median figure (the median
//     of every rank's figure, every node's);
//   * a rank over at every judgement for W (on the judging agent's own steady clock) is flagged a
//     straggler; it recovers at the first judgement it is not over;
//   * a judgement without a figure for the rank or without a job median changes nothing (a rank
//     between beats, a node rank 0 that has not published the median yet).
//
// Thread safety: pure functions and plain values.
#pragma once

#include <chrono>
#include <optional>
#include <string>
#include <vector>

namespace ddp {

// The lower median of `values` (the lower middle one for an even count, so that with two ranks, or
// half of them slow, the slow ones are compared with the fast); nullopt when empty.
// O(N) (std::nth_element); `values` is taken by value and reordered.
std::optional<double> medianOf(std::vector<double> values);

// One rank's judgement state, kept between judgements.
struct StragglerState {
  std::optional<std::chrono::steady_clock::time_point> overSince;  // over at every judgement since
  bool flagged = false;
};

enum class StragglerChange { kNone, kFlagged, kRecovered };

struct StragglerRule {
  double threshold = 1.5;                       // X: more than 1
  std::chrono::milliseconds window{30000};      // W
};

// Judges one rank at `now`: updates `state`, returns what changed.
StragglerChange judgeRank(StragglerState& state, std::optional<double> computeS,
                          std::optional<double> jobMedianS, const StragglerRule& rule,
                          std::chrono::steady_clock::time_point now);

// The agent's log lines:
//   "rank 3 is a straggler: compute 12.1 ms/step vs job median 5.9 ms (x2.05) for 10 s"
//   "rank 3 is no longer a straggler: compute 6.0 ms/step vs job median 5.9 ms (x1.02)"
std::string stragglerLine(int rank, double computeS, double medianS, std::chrono::milliseconds over);
std::string recoveredLine(int rank, double computeS, double medianS);

}  // namespace ddp
