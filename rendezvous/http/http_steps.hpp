// Straggler detection as the status pages show it (docs/running.md "Straggler detection"): each
// rank's compute time per step and straggler verdict, and the job's median, read from the agents'
// status records (launcher/status/node_steps.hpp has the fields: the agents measure and judge,
// the pages only show what they published).
//
//   /status   each job gains "step_median_s" (node rank 0's, null without straggler detection)
//             and "stragglers": [{"rank", "host", "node_rank", "compute_s", "x_median"}], the
//             flagged ranks by rank; every worker entry of a node's "status" record carries its
//             "compute_s" and "straggler" as the agent wrote them
//   /metrics  ddprun_rank_step_seconds{job,rank}      gauge  a rank's compute seconds per step
//             ddprun_rank_straggler{job,rank}         gauge  1 while flagged, else 0
//             ddprun_job_step_median_seconds{job}     gauge  the job's median the ranks are judged by
//
// Thread safety: pure functions.
#pragma once

#include <optional>
#include <string>
#include <vector>

#include "rendezvous/base/rank_layout.hpp"
#include "rendezvous/http/http_job_view.hpp"

namespace ddp {

// One rank's figure. Its RankLayout comes from the newest round (JobView::nodes: groupRank, the
// nodes' localWorldSize and their count and sum) and its agent's status record (rank, localRank).
struct RankStep : RankLayout {
  std::string host;
  double computeS = 0;
  bool straggler = false;
};

// Every rank with a figure, by rank (ranks of nodes without straggler detection have none).
std::vector<RankStep> rankSteps(const JobView& job);

// The job's median (node rank 0's record), when published.
std::optional<double> jobStepMedian(const JobView& job);

// The /status fields above: "step_median_s" and "stragglers".
nlohmann::json stepStatusJson(const JobView& job);

}  // namespace ddp
