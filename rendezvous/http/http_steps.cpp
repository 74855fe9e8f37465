#include "rendezvous/http/http_steps.hpp"

#include <algorithm>
#include <cmath>

namespace ddp {

using nlohmann::json;

namespace {

// The sizes of the round `job.nodes` describes.
RankLayout roundSizes(const JobView& job) {
  RankLayout sizes;
  sizes.worldSize = 0;
  for (const auto& node : job.nodes) sizes.worldSize += node.localWorldSize;
  sizes.groupWorldSize = int(job.nodes.size());
  return sizes;
}

}  // namespace

std::vector<RankStep> rankSteps(const JobView& job) {
  std::vector<RankStep> out;
  const RankLayout sizes = roundSizes(job);
  for (const auto& node : job.nodes) {
    const json& s = node.status;
    if (!s.is_object() || !s.contains("workers") || !s["workers"].is_array()) continue;
    for (const auto& w : s["workers"]) {
      if (!w.is_object() || !w.contains("compute_s") || !w["compute_s"].is_number()) continue;
      if (!w.contains("rank") || !w["rank"].is_number_integer()) continue;
      const double v = w["compute_s"].get<double>();
      if (!std::isfinite(v) || v < 0) continue;
      const bool flagged = w.contains("straggler") && w["straggler"].is_boolean() &&
                           w["straggler"].get<bool>();
      RankStep step{sizes, node.host, v, flagged};
      step.rank = w["rank"].get<int>();
      if (w.contains("local_rank") && w["local_rank"].is_number_integer()) {
        step.localRank = w["local_rank"].get<int>();
      }
      step.localWorldSize = node.localWorldSize;
      step.groupRank = node.rank;
      out.push_back(step);
    }
  }
  std::sort(out.begin(), out.end(), [](const RankStep& a, const RankStep& b) { return a.rank < b.rank; });
  return out;
}

std::optional<double> jobStepMedian(const JobView& job) {
  for (const auto& node : job.nodes) {
    if (node.rank != 0) continue;
    const json& s = node.status;
    if (s.is_object() && s.contains("step_median_s") && s["step_median_s"].is_number()) {
      return s["step_median_s"].get<double>();
    }
  }
  return std::nullopt;
}

json stepStatusJson(const JobView& job) {
  const auto median = jobStepMedian(job);
  json stragglers = json::array();
  for (const auto& r : rankSteps(job)) {
    if (!r.straggler) continue;
    json ratio = median && *median > 0 ? json(std::round(r.computeS / *median * 100) / 100) : json(nullptr);
    stragglers.push_back({{"rank", r.rank}, {"node_rank", r.groupRank}, {"host", r.host},
                          {"compute_s", r.computeS}, {"x_median", ratio}});
  }
  return {{"step_median_s", median ? json(*median) : json(nullptr)}, {"stragglers", stragglers}};
}

}  // namespace ddp
