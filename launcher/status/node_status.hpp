// What an agent publishes for the status pages (docs/status.md), as pure
// functions over values; launcher/status/status_publisher.hpp writes them.
//
//   node status record  (r/<g>/status/<rank>, one JSON object, rewritten on changes):
//     {"v": 1, "generation": 3, "node_rank": 1, "host": "n2", "agent_pid": 4242,
//      "max_restarts": 3, "restarts_used": 1, "ended": null | "restart" | ...,
//      "workers": [{"local_rank": 0, "rank": 2, "pid": 4250, "state": "running",
//                   "exit_code": null, "signal": null}, ...]}
//     a worker's state is running, succeeded, failed (exited non-zero or killed, by itself) or
//     stopped (ddprun stopped it); at most 256 workers are listed. With --straggler-threshold
//     the record has step fields too (node_steps.hpp).
//   history entry  (one line of `history`, oldest first, the newest 32 generations):
//     {"generation": 2, "nodes": 2, "workers": 4, "restarts_used": 1, "end": "restart",
//      "detail": "...", "root_cause": "rank 3 on n2 (pid 4251) exited with 1: ..." | null}
//     `end` is how the generation ended for the agent that wrote the entry — node rank 0 of the
//     next generation, or of a later one when that one died before writing it (each node keeps
//     the ends of the generations it took part in, and node rank 0 adds those the history lacks):
//     restart, peer lost, scale-up, job failed, succeeded, store lost or signal; `root_cause` is
//     the failure summary's root cause (failure_summary.hpp) over every record of that generation.
//   metric ring  (`metrics`, the newest 256 points, one JSON object per line, oldest first):
//     a worker's point (rendezvous/store/metric_points.hpp) with only its numeric fields n, step,
//     epoch, loss, lr, samples_per_s, time, plus "gen": the generation that wrote it.
//
// Thread safety: pure functions.
#pragma once

#include <cstdint>
#include <deque>
#include <optional>
#include <string>
#include <vector>

#include "launcher/status/node_steps.hpp"
#include "launcher/failures/failure_summary.hpp"
#include "launcher/workers/worker_group.hpp"
#include "rendezvous/algorithm/rendezvous.hpp"

namespace ddp {

inline constexpr std::size_t kMaxListedWorkers = 256;
inline constexpr std::size_t kHistoryEntries = 32;
inline constexpr std::size_t kMetricRingPoints = 256;

struct NodeStatus {
  int64_t generation = -1;
  int nodeRank = 0;
  int nodeCount = 0;
  int worldSize = 0;
  std::string host;
  int agentPid = 0;
  int maxRestarts = 0;
  int restartsUsed = 0;
  std::vector<WorkerState> workers;
  std::string ended;  // "" while the generation runs
  std::optional<NodeSteps> steps;  // with --straggler-threshold (node_steps.hpp)
};

// How one generation ended, as node rank 0's agent saw it.
struct GenerationEnd {
  int64_t generation = 0;
  int nodes = 0;
  int workers = 0;
  int restartsUsed = 0;
  std::string how;
  std::string detail;
};

std::string nodeStatusJson(const NodeStatus& status);
// running, succeeded, failed or stopped.
std::string workerStateName(const WorkerState& worker);

// The history entry of `end`, with the root cause over those of `records` of its generation.
std::string historyEntryJson(const GenerationEnd& end, const std::vector<FailureRecord>& records);
// `history` (JSON lines) with `entry` added — replacing an entry of the same generation — and
// cut to the newest kHistoryEntries, oldest first (by generation).
std::string appendHistory(const std::string& history, const std::string& entry);
// Whether `history` has an entry of `generation`.
bool historyHas(const std::string& history, int64_t generation);

// A worker's point as the ring keeps it (see above), or nullopt when it is not a JSON object.
std::optional<std::string> ringPoint(const std::string& point, int64_t generation);
// Adds `line` to `ring`, dropping the oldest beyond kMetricRingPoints.
void pushRing(std::deque<std::string>& ring, std::string line);
std::string joinLines(const std::deque<std::string>& lines);
// The non-empty lines of `text`.
std::vector<std::string> splitLines(const std::string& text);

// "rank 3 on n2 (pid 4251) exited with 1: <first line of the message>".
std::string describeFailure(const WorkerFailure& failure);

}  // namespace ddp
