#include "launcher/straggler/straggler_judge.hpp"

#include <algorithm>
#include <cstdio>

namespace ddp {
namespace {

std::string ms(double seconds) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.1f ms", seconds * 1000);
  return buf;
}

std::string ratio(double computeS, double medianS) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "x%.2f", medianS > 0 ? computeS / medianS : 0.0);
  return buf;
}

}  // namespace

std::optional<double> medianOf(std::vector<double> values) {
  if (values.empty()) return std::nullopt;
  // The lower median: with an even count, the lower middle value, so that in a job of two ranks
  // (or half of them slow) the slow ones are judged against the fast ones, not a mean of both.
  const auto mid = values.begin() + std::ptrdiff_t((values.size() - 1) / 2);
  std::nth_element(values.begin(), mid, values.end());
  return *mid;
}

StragglerChange judgeRank(StragglerState& state, std::optional<double> computeS,
                          std::optional<double> jobMedianS, const StragglerRule& rule,
                          std::chrono::steady_clock::time_point now) {
  if (!computeS || !jobMedianS || !(*jobMedianS > 0)) return StragglerChange::kNone;
  const bool over = *computeS > rule.threshold * *jobMedianS;
  if (!over) {
    state.overSince.reset();
    if (!state.flagged) return StragglerChange::kNone;
    state.flagged = false;
    return StragglerChange::kRecovered;
  }
  if (!state.overSince) state.overSince = now;
  if (state.flagged || now - *state.overSince < rule.window) return StragglerChange::kNone;
  state.flagged = true;
  return StragglerChange::kFlagged;
}

std::string stragglerLine(int rank, double computeS, double medianS, std::chrono::milliseconds over) {
  char secs[32];
  std::snprintf(secs, sizeof secs, "%.0f s", double(over.count()) / 1000);
  return "rank " + std::to_string(rank) + " is a straggler: compute " + ms(computeS) +
         "/step vs job median " + ms(medianS) + " (" + ratio(computeS, medianS) + ") for " + secs;
}

std::string recoveredLine(int rank, double computeS, double medianS) {
  return "rank " + std::to_string(rank) + " is no longer a straggler: compute " + ms(computeS) +
         "/step vs job median " + ms(medianS) + " (" + ratio(computeS, medianS) + ")";
}

}  // namespace ddp
