// The straggler part of a node status record (node_status.hpp; docs/running.md "Straggler
// detection"), written only with --straggler-threshold:
//
//   each worker entry gains  "compute_s": 0.0121 | null   its figure: the median of its beats'
//                                                         compute seconds per step in the window
//                            "straggler": true | false    its agent's verdict
//   node rank 0's record gains
//     "step_median_s": 0.0059 | null   the job's median of every rank's figure (every node's
//                                      record), which every agent judges its ranks against
//     "straggler_threshold": 1.5, "straggler_window_s": 30   the rule
//
// Thread safety: pure functions and plain values.
#pragma once

#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json_fwd.hpp>

namespace ddp {

struct NodeSteps {
  std::vector<std::optional<double>> computeS;  // by local rank
  std::vector<bool> straggler;                  // by local rank
  std::optional<double> jobMedianS;             // written by node rank 0 only
  double threshold = 0;
  double windowS = 0;
};

// Adds `steps` to the record `record` (a JSON object with "workers", each with "local_rank").
void addStepFields(nlohmann::json& record, const NodeSteps& steps, bool nodeRankZero);

// The figures ("compute_s" numbers) of the workers in the record text `record`; none when it is
// not such a record. Never throws.
std::vector<double> stepFiguresOf(const std::string& record);

// "step_median_s" of the record text `record` (node rank 0's), when it has a number there. Never
// throws.
std::optional<double> jobMedianOf(const std::string& record);

}  // namespace ddp
