#include "rendezvous/http/http_metrics.hpp"
#include "rendezvous/http/http_steps.hpp"

#include "rendezvous/base/fd_limit.hpp"

#include <unistd.h>

#include <algorithm>
#include <cctype>
#include <cmath>
#include <fstream>
#include <functional>
#include <map>
#include <optional>
#include <sstream>

namespace ddp {
namespace {

using Labels = std::vector<std::pair<std::string, std::string>>;

std::string escapeLabel(const std::string& value) {
  std::string out;
  for (char c : value) {
    if (c == '\\') {
      out += "\\\\";
    } else if (c == '"') {
      out += "\\\"";
    } else if (c == '\n') {
      out += "\\n";
    } else {
      out += c;
    }
  }
  return out;
}

std::string formatValue(double value) {
  if (std::isnan(value)) return "NaN";
  if (std::isinf(value)) return value > 0 ? "+Inf" : "-Inf";
  std::ostringstream out;
  out.precision(12);
  out << value;
  return out.str();
}

// Writes families in order: HELP and TYPE once, then the family's samples.
class TextWriter {
 public:
  void family(const std::string& name, const char* type, const std::string& help) {
    out_ << "# HELP " << name << ' ' << help << "\n# TYPE " << name << ' ' << type << '\n';
  }
  void sample(const std::string& name, const Labels& labels, double value) {
    out_ << name;
    if (!labels.empty()) {
      out_ << '{';
      for (std::size_t i = 0; i < labels.size(); ++i) {
        out_ << (i ? "," : "") << labels[i].first << "=\"" << escapeLabel(labels[i].second) << '"';
      }
      out_ << '}';
    }
    out_ << ' ' << formatValue(value) << '\n';
  }
  std::string str() const { return out_.str(); }

 private:
  std::ostringstream out_;
};

std::string lower(std::string_view text) {
  std::string out(text);
  std::transform(out.begin(), out.end(), out.begin(),
                 [](unsigned char c) { return static_cast<char>(std::tolower(c)); });
  return out;
}

void requestHistogram(TextWriter& w, const StoreStats& stats) {
  const std::string name = "ddprund_request_duration_seconds";
  w.family(name, "histogram",
           "Time from the read that completed a request to its reply being queued.");
  uint64_t cumulative = 0;
  for (std::size_t i = 0; i < kRequestSecondsBounds.size(); ++i) {
    cumulative += stats.requestBuckets[i];
    w.sample(name + "_bucket", {{"le", formatValue(kRequestSecondsBounds[i])}},
             static_cast<double>(cumulative));
  }
  cumulative += stats.requestBuckets.back();
  w.sample(name + "_bucket", {{"le", "+Inf"}}, static_cast<double>(cumulative));
  w.sample(name + "_sum", {}, stats.requestSecondsSum);
  w.sample(name + "_count", {}, static_cast<double>(cumulative));
}

// Worker counts by state from a node's status record ("workers": [{"state": ...}]).
void countWorkers(const nlohmann::json& status, std::map<std::string, int>& byState) {
  if (!status.is_object() || !status.contains("workers") || !status["workers"].is_array()) return;
  for (const auto& worker : status["workers"]) {
    if (worker.is_object() && worker.contains("state") && worker["state"].is_string()) {
      ++byState[worker["state"].get<std::string>()];
    }
  }
}

std::optional<double> lastPoint(const JobView& job, const char* field) {
  for (auto it = job.points.rbegin(); it != job.points.rend(); ++it) {
    if (it->contains(field) && (*it)[field].is_number()) return (*it)[field].get<double>();
  }
  return std::nullopt;
}

using JobValue = std::function<std::optional<double>(const JobView&)>;

void perJob(TextWriter& w, const std::vector<JobView>& jobs, const std::string& name,
            const std::string& help, const JobValue& value) {
  w.family(name, "gauge", help);
  for (const auto& job : jobs) {
    if (const auto v = value(job)) w.sample(name, {{"job", job.runId}}, *v);
  }
}

// Straggler detection's families (http_steps.hpp), from the agents' records.
void rankStepMetrics(TextWriter& w, const std::vector<JobView>& jobs) {
  w.family("ddprun_rank_step_seconds", "gauge",
           "A rank's compute seconds per step (its own work, not waiting for peers), as its agent "
           "measured it over the straggler window.");
  for (const auto& job : jobs) {
    for (const auto& r : rankSteps(job)) {
      w.sample("ddprun_rank_step_seconds", {{"job", job.runId}, {"rank", std::to_string(r.rank)}},
               r.computeS);
    }
  }
  w.family("ddprun_rank_straggler", "gauge",
           "1 while the rank is flagged a straggler (over the threshold x the job's median for "
           "the window), else 0.");
  for (const auto& job : jobs) {
    for (const auto& r : rankSteps(job)) {
      w.sample("ddprun_rank_straggler", {{"job", job.runId}, {"rank", std::to_string(r.rank)}},
               r.straggler ? 1 : 0);
    }
  }
  perJob(w, jobs, "ddprun_job_step_median_seconds",
         "The job's median compute seconds per step, which its ranks are judged against.",
         [](const JobView& j) { return jobStepMedian(j); });
}

void perNode(TextWriter& w, const std::vector<JobView>& jobs, const std::string& name,
             const std::string& help,
             const std::function<std::optional<double>(const NodeView&)>& value) {
  w.family(name, "gauge", help);
  for (const auto& job : jobs) {
    for (const auto& node : job.nodes) {
      if (const auto v = value(node)) {
        w.sample(name, {{"job", job.runId}, {"node_rank", std::to_string(node.rank)},
                        {"host", node.host}}, *v);
      }
    }
  }
}


// What connections the store holds, may hold and refused for want of room.
void capacityMetrics(TextWriter& w, const StoreSnapshot& s) {
  w.family("ddprund_connections_max", "gauge",
           "Connections the store holds at most (--max-connections, by default what the "
           "descriptor limit leaves).");
  w.sample("ddprund_connections_max", {}, static_cast<double>(s.connectionLimit));
  w.family("ddprund_out_of_descriptors_total", "counter",
           "Connections the store had no file descriptor for (each told so when possible).");
  w.sample("ddprund_out_of_descriptors_total", {}, static_cast<double>(s.stats.outOfDescriptors));
  w.family("ddprund_connections_unauthenticated", "gauge",
           "Open connections that have not presented the token yet (--token-file).");
  w.sample("ddprund_connections_unauthenticated", {}, static_cast<double>(s.unauthenticated));
  w.family("ddprund_unauthenticated_closed_total", "counter",
           "Connections closed before presenting the token: --hello-timeout passed, or closed "
           "to make room for others.");
  w.sample("ddprund_unauthenticated_closed_total", {},
           static_cast<double>(s.unauthenticatedClosed));
}

void processMetrics(TextWriter& w, const ProcessFigures& p) {
  if (p.residentBytes > 0) {
    w.family("process_resident_memory_bytes", "gauge", "Resident memory size in bytes.");
    w.sample("process_resident_memory_bytes", {}, static_cast<double>(p.residentBytes));
  }
  if (p.maxFds > 0) {
    w.family("process_open_fds", "gauge", "Number of open file descriptors.");
    w.sample("process_open_fds", {}, static_cast<double>(p.openFds));
    w.family("process_max_fds", "gauge", "Maximum number of open file descriptors.");
    w.sample("process_max_fds", {}, static_cast<double>(p.maxFds));
  }
}

}  // namespace

ProcessFigures processFigures() {
  ProcessFigures p;
  p.residentBytes = residentMemoryBytes();
  p.openFds = openFdCount();
  const uint64_t soft = currentFdLimit().soft;
  p.maxFds = soft == UINT64_MAX ? 0 : soft;
  return p;
}

std::string processMetricsText(const ProcessFigures& process) {
  TextWriter w;
  processMetrics(w, process);
  return w.str();
}

std::string storeMetricsText(const StoreSnapshot& s, const ProcessFigures& process) {
  TextWriter w;
  const auto& st = s.stats;
  w.family("ddprund_connections", "gauge", "Open store connections.");
  w.sample("ddprund_connections", {}, static_cast<double>(s.connections));
  capacityMetrics(w, s);
  w.family("ddprund_connections_accepted_total", "counter", "Store connections accepted.");
  w.sample("ddprund_connections_accepted_total", {}, static_cast<double>(st.connectionsAccepted));
  w.family("ddprund_connections_refused_total", "counter",
           "Store connections closed at once because --max-connections were open.");
  w.sample("ddprund_connections_refused_total", {}, static_cast<double>(st.connectionsRefused));
  w.family("ddprund_requests_total", "counter", "Store requests applied, by operation.");
  for (std::size_t op = 0; op < kOpCount; ++op) {
    w.sample("ddprund_requests_total", {{"op", lower(wire::opName(static_cast<wire::Op>(op)))}},
             static_cast<double>(st.requests[op]));
  }
  w.family("ddprund_received_bytes_total", "counter", "Bytes read from store connections.");
  w.sample("ddprund_received_bytes_total", {}, static_cast<double>(st.bytesReceived));
  w.family("ddprund_sent_bytes_total", "counter", "Bytes written to store connections.");
  w.sample("ddprund_sent_bytes_total", {}, static_cast<double>(st.bytesSent));
  requestHistogram(w, st);
  w.family("ddprund_keys", "gauge", "Keys and queues the store holds.");
  w.sample("ddprund_keys", {}, static_cast<double>(s.keys));
  w.family("ddprund_status_snapshot_seconds", "gauge",
           "Time the store's io thread spent copying the state this page shows.");
  w.sample("ddprund_status_snapshot_seconds", {},
           std::chrono::duration<double>(s.cost).count());
  processMetrics(w, process);
  return w.str();
}

std::string jobMetricsText(const std::vector<JobView>& jobs) {
  TextWriter w;
  w.family("ddprun_job_info", "gauge", "One per job: its incarnation and state.");
  for (const auto& job : jobs) {
    w.sample("ddprun_job_info", {{"job", job.runId}, {"incarnation", std::to_string(job.incarnation)},
                                 {"state", job.state}}, 1);
  }
  perJob(w, jobs, "ddprun_job_nodes", "Nodes of the job's newest formed round.",
         [](const JobView& j) { return std::optional<double>(static_cast<double>(j.nodes.size())); });
  perJob(w, jobs, "ddprun_job_generation", "The job's newest generation (restart count).",
         [](const JobView& j) {
           return j.generation ? std::optional<double>(static_cast<double>(*j.generation))
                               : std::nullopt;
         });
  perJob(w, jobs, "ddprun_job_restarts_used", "Failure restarts the job spent from its budget.",
         [](const JobView& j) { return std::optional<double>(static_cast<double>(j.restartsUsed)); });
  perJob(w, jobs, "ddprun_job_failure_records",
         "Failure records published (one per node and failed generation).",
         [](const JobView& j) { return std::optional<double>(static_cast<double>(j.failures.size())); });
  perJob(w, jobs, "ddprun_job_recoveries_in_place",
         "Failed workers the job replaced in place, the others running on (each spent a restart).",
         [](const JobView& j) { return std::optional<double>(static_cast<double>(j.recoveriesInPlace())); });
  perJob(w, jobs, "ddprun_job_nodes_excluded",
         "Nodes left out of the job for a cooldown that have not joined again (bad-node exclusion).",
         [](const JobView& j) { return std::optional<double>(static_cast<double>(j.nodesExcluded())); });
  perJob(w, jobs, "ddprun_job_node_exclusions",
         "Node exclusions the job granted so far (bad-node exclusion).",
         [](const JobView& j) { return std::optional<double>(static_cast<double>(j.exclusionCount)); });
  perJob(w, jobs, "ddprun_job_loss", "Loss of the job's newest metric point.",
         [](const JobView& j) { return lastPoint(j, "loss"); });
  perJob(w, jobs, "ddprun_job_samples_per_second", "Samples per second of the newest metric point.",
         [](const JobView& j) { return lastPoint(j, "samples_per_s"); });
  w.family("ddprun_job_workers", "gauge", "The job's workers by state, from the agents' records.");
  for (const auto& job : jobs) {
    std::map<std::string, int> byState;
    for (const auto& node : job.nodes) countWorkers(node.status, byState);
    for (const auto& [state, count] : byState) {
      w.sample("ddprun_job_workers", {{"job", job.runId}, {"state", state}}, count);
    }
  }
  rankStepMetrics(w, jobs);
  perNode(w, jobs, "ddprun_node_heartbeat_age_seconds", "Seconds since the node's heartbeat moved.",
          [](const NodeView& n) { return n.heartbeatAgeS; });
  perNode(w, jobs, "ddprun_node_heartbeats", "The node's heartbeat counter in the current round.",
          [](const NodeView& n) {
            return n.heartbeats ? std::optional<double>(static_cast<double>(*n.heartbeats))
                                : std::nullopt;
          });
  return w.str();
}

std::size_t residentMemoryBytes() {
  std::ifstream statm("/proc/self/statm");
  std::size_t pages = 0, resident = 0;
  if (!(statm >> pages >> resident)) return 0;
  return resident * static_cast<std::size_t>(::sysconf(_SC_PAGESIZE));
}

}  // namespace ddp
