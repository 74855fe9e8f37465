#include "launcher/straggler/straggler_watch.hpp"

namespace ddp {

void StragglerWatch::startGeneration(int localWorldSize) {
  std::lock_guard<std::mutex> lock(mutex_);
  ranks_.assign(static_cast<std::size_t>(std::max(0, localWorldSize)), Rank{});
}

void StragglerWatch::forget(int lr) {
  std::lock_guard<std::mutex> lock(mutex_);
  if (lr >= 0 && static_cast<std::size_t>(lr) < ranks_.size()) ranks_[std::size_t(lr)] = Rank{};
}

void StragglerWatch::beat(int lr, double computeS, Clock::time_point now) {
  std::lock_guard<std::mutex> lock(mutex_);
  if (lr < 0 || static_cast<std::size_t>(lr) >= ranks_.size()) return;
  auto& beats = ranks_[std::size_t(lr)].beats;
  beats.emplace_back(now, computeS);
  if (beats.size() > kMaxBeats) beats.pop_front();
}

std::vector<std::optional<double>> StragglerWatch::figures(Clock::time_point now) {
  std::lock_guard<std::mutex> lock(mutex_);
  std::vector<std::optional<double>> out;
  out.reserve(ranks_.size());
  for (auto& r : ranks_) {
    while (!r.beats.empty() && now - r.beats.front().first > rule_.window) r.beats.pop_front();
    std::vector<double> values;
    values.reserve(r.beats.size());
    for (const auto& b : r.beats) values.push_back(b.second);
    out.push_back(medianOf(std::move(values)));
  }
  return out;
}

StragglerWatch::Judged StragglerWatch::judge(const std::vector<std::optional<double>>& figures,
                                             std::optional<double> jobMedianS,
                                             const std::vector<int>& ranks, Clock::time_point now) {
  std::lock_guard<std::mutex> lock(mutex_);
  Judged out;
  for (std::size_t lr = 0; lr < ranks_.size(); ++lr) {
    StragglerState& state = ranks_[lr].state;
    const std::optional<double> figure = lr < figures.size() ? figures[lr] : std::nullopt;
    const auto since = state.overSince;
    const int rank = lr < ranks.size() ? ranks[lr] : int(lr);
    switch (judgeRank(state, figure, jobMedianS, rule_, now)) {
      case StragglerChange::kFlagged:
        out.lines.push_back(stragglerLine(
            rank, *figure, *jobMedianS,
            std::chrono::duration_cast<std::chrono::milliseconds>(now - since.value_or(now))));
        out.lineIsFlag.push_back(true);
        break;
      case StragglerChange::kRecovered:
        out.lines.push_back(recoveredLine(rank, *figure, *jobMedianS));
        out.lineIsFlag.push_back(false);
        break;
      case StragglerChange::kNone:
        break;
    }
    out.flagged.push_back(state.flagged);
  }
  return out;
}

}  // namespace ddp
