#include "launcher/status/node_steps.hpp"

#include <cmath>

#include <nlohmann/json.hpp>

namespace ddp {

using nlohmann::json;

namespace {

json orNull(const std::optional<double>& v) { return v ? json(*v) : json(nullptr); }

}  // namespace

void addStepFields(json& record, const NodeSteps& steps, bool nodeRankZero) {
  if (record.contains("workers") && record["workers"].is_array()) {
    for (auto& w : record["workers"]) {
      const auto lr = static_cast<std::size_t>(w.value("local_rank", -1));
      w["compute_s"] = lr < steps.computeS.size() ? orNull(steps.computeS[lr]) : json(nullptr);
      w["straggler"] = lr < steps.straggler.size() && steps.straggler[lr];
    }
  }
  if (!nodeRankZero) return;
  record["step_median_s"] = orNull(steps.jobMedianS);
  record["straggler_threshold"] = steps.threshold;
  record["straggler_window_s"] = steps.windowS;
}

std::vector<double> stepFiguresOf(const std::string& record) {
  std::vector<double> out;
  const json doc = json::parse(record, nullptr, false);
  if (!doc.is_object() || !doc.contains("workers") || !doc["workers"].is_array()) return out;
  for (const auto& w : doc["workers"]) {
    if (!w.is_object() || !w.contains("compute_s") || !w["compute_s"].is_number()) continue;
    const double v = w["compute_s"].get<double>();
    if (std::isfinite(v) && v >= 0) out.push_back(v);
  }
  return out;
}

std::optional<double> jobMedianOf(const std::string& record) {
  const json doc = json::parse(record, nullptr, false);
  if (!doc.is_object() || !doc.contains("step_median_s") || !doc["step_median_s"].is_number()) {
    return std::nullopt;
  }
  return doc["step_median_s"].get<double>();
}

}  // namespace ddp
