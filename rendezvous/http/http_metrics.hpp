// The Prometheus text format (version 0.0.4) of the status pages' /metrics: the store server's
// counters (ddprund only), the process's memory and descriptors (ddprund and agents) and, for every job, its nodes, generation, restarts, failures, workers,
// last metric point and each node's heartbeat age. Every family has HELP and TYPE lines, counters
// end in _total, units are seconds and bytes; `promtool check metrics` accepts the output
// (tests/integration/status_promtool_test.sh).
//
//   ddprund_connections                     gauge    open store connections
//   ddprund_connections_max                 gauge    the most it holds (--max-connections)
//   ddprund_out_of_descriptors_total        counter  connections it had no descriptor for
//   ddprund_connections_unauthenticated     gauge    open, token not presented yet
//   ddprund_unauthenticated_closed_total    counter  closed before presenting the token
//   ddprund_connections_accepted_total      counter
//   ddprund_connections_refused_total       counter  over --max-connections
//   ddprund_requests_total{op}              counter  requests applied, by op ("set", "add", ...)
//   ddprund_received_bytes_total            counter
//   ddprund_sent_bytes_total                counter
//   ddprund_request_duration_seconds        histogram  (store_stats.hpp says what is measured)
//   ddprund_keys                            gauge    keys and queues held
//   ddprund_status_snapshot_seconds         gauge    io-thread time of the last status snapshot
//   process_resident_memory_bytes           gauge
//   process_open_fds, process_max_fds       gauge    descriptors open, the soft RLIMIT_NOFILE
//   ddprun_job_info{job,incarnation,state}  gauge    1 per job
//   ddprun_job_nodes{job}                   gauge    nodes of the newest formed round
//   ddprun_job_generation{job}              gauge
//   ddprun_job_restarts_used{job}           gauge    failure restarts spent from the budget
//   ddprun_job_failure_records{job}         gauge    failure records published (one per node
//                                                    and failed generation)
//   ddprun_job_loss{job}                    gauge    of the newest metric point
//   ddprun_job_samples_per_second{job}      gauge    of the newest metric point
//   ddprun_job_workers{job,state}           gauge    workers by state (running, succeeded,
//                                                    failed, stopped), from the status records
//   ddprun_node_heartbeat_age_seconds{job,node_rank,host}  gauge
//   ddprun_node_heartbeats{job,node_rank,host}             gauge  the heartbeat counter
//   ddprun_rank_step_seconds{job,rank}      gauge    straggler detection (http_steps.hpp): a
//   ddprun_rank_straggler{job,rank}         gauge    rank's compute s/step, 1 while flagged,
//   ddprun_job_step_median_seconds{job}     gauge    the job's median
//
// Thread safety: pure functions.
#pragma once

#include <string>
#include <vector>

#include "rendezvous/http/http_job_view.hpp"
#include "rendezvous/server/store_stats.hpp"

namespace ddp {

// The process_* figures of this process (0 where unknown: that family is left out).
struct ProcessFigures {
  std::size_t residentBytes = 0;
  std::size_t openFds = 0;
  std::size_t maxFds = 0;  // the soft RLIMIT_NOFILE
};
ProcessFigures processFigures();

// The process_* families alone (an agent's pages).
std::string processMetricsText(const ProcessFigures& process);

// The ddprund_* and process_* families, from a snapshot.
std::string storeMetricsText(const StoreSnapshot& snapshot, const ProcessFigures& process);

// The ddprun_* families of `jobs`.
std::string jobMetricsText(const std::vector<JobView>& jobs);

// Resident set size of this process (from /proc/self/statm), 0 when unknown.
std::size_t residentMemoryBytes();

}  // namespace ddp
