// JobView: one job as the status pages show it, read from its keys in the rendezvous store
// (rendezvous/algorithm/detail/rendezvous_keys.hpp has the layout; the status keys it lists —
// r/<g>/status/<rank>, metrics, history — are written by the agents, launcher/status/status_publisher.hpp).
//
// readJob() reads through a KeySource, so ddprund (a snapshot its io thread copied) and an agent
// (its own connection to the rendezvous store) build the same view with the same code. It makes
// about a dozen point reads plus three per node of the job's newest formed round. Malformed values
// never fail the view: the part they belong to is left empty (and `problems` says why).
//
// Thread safety: plain values; readJob() is as thread-safe as its KeySource.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

namespace ddp {

// Where readJob() gets values.
class KeySource {
 public:
  virtual ~KeySource() = default;
  // The value of `key`, or nullopt when it is missing. May throw what the store throws.
  virtual std::optional<std::string> get(const std::string& key) = 0;
  // Seconds since `key` last changed (it holds `value` now), when the source can tell.
  virtual std::optional<double> secondsSinceChange(const std::string& key,
                                                   const std::string& value) = 0;
};

struct NodeView {
  int rank = 0;
  std::string host;
  std::string addr;
  int agentPid = 0;
  int localWorldSize = 0;
  std::optional<int64_t> heartbeats;      // the node's heartbeat counter in this round
  std::optional<double> heartbeatAgeS;    // seconds since it last moved
  nlohmann::json status;                  // its agent's status record; null when none yet
};

struct JobView {
  std::string runId;
  int64_t incarnation = 0;
  // "waiting" (no round formed yet), "running", "restarting" (the newest round ended; the next
  // one is forming), "succeeded", "failed".
  std::string state = "waiting";
  std::optional<int64_t> generation;  // the newest formed round (the last one, once ended)
  int64_t restartsUsed = 0;
  std::optional<int> maxRestarts;     // from the status records (the agents know it)
  int joining = 0;                    // "waiting": agents that joined the open round so far
  // The tombstone, once the job ended.
  struct Ended {
    bool succeeded = false;
    int64_t unixMs = 0;
    int64_t generation = -1;
    std::string reason;
  };
  std::optional<Ended> ended;
  // How the newest formed round ended, once it did: "restart", "peer lost", "scale-up",
  // "job failed", "store lost".
  std::optional<std::string> roundEnd;
  std::string roundEndDetail;
  std::vector<NodeView> nodes;   // of the newest formed round, by node rank
  nlohmann::json history = nlohmann::json::array();   // ended generations, oldest first
  nlohmann::json failures = nlohmann::json::array();  // failure records, oldest first (a record
                                                      // with "quorum" >= 0: recovered in place)
  // Records recovered in place among `failures`.
  int64_t recoveriesInPlace() const;
  nlohmann::json points = nlohmann::json::array();    // metric points, oldest first
  // Bad-node exclusions (docs/running.md "Bad-node exclusion"): the newest 32, oldest first, each
  // {host, pid, node_rank, generation, why, cooldown_ms, unix_ms, returned_at (-1: still out)},
  // and how many the job granted in all.
  nlohmann::json exclusions = nlohmann::json::array();
  int64_t exclusionCount = 0;
  // Exclusions whose node has not joined again yet.
  int64_t nodesExcluded() const;
  std::vector<std::string> problems;  // values that could not be read
};

// Reads job `runId` (its current incarnation). Throws what the source throws.
JobView readJob(KeySource& source, const std::string& runId);

// The JSON of /status for these jobs: {"jobs": [...]} plus `server` when it is not null. Each
// job's "recoveries" lists its recoveries in place (docs/recovery.md): generation, quorum, the
// node that made it and the ranks it replaced, oldest first. Each job's "step_median_s" and
// "stragglers" are straggler detection's (http_steps.hpp).
nlohmann::json statusJson(const std::vector<JobView>& jobs, const nlohmann::json& server);

// One JSON object per line (the metrics and history keys); malformed lines are skipped.
nlohmann::json parseJsonLines(const std::string& text);

}  // namespace ddp
