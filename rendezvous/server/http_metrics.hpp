// The Prometheus text format (version 0.0.4) of the status pages' /metrics: the store server's
// counters (ddprund only) and, for every job, its nodes, generation, restarts, failures, workers,
// last metric point and each node's heartbeat age. Every family has HELP and TYPE lines, counters
// end in _total, units are seconds and bytes; `promtool check metrics` accepts the output
// (tests/integration/status_promtool_test.sh).
//
//   ddprund_connections                     gauge    open store connections
//   ddprund_connections_accepted_total      counter
//   ddprund_connections_refused_total       counter  over --max-connections
//   ddprund_requests_total{op}              counter  requests applied, by op ("set", "add", ...)
//   ddprund_received_bytes_total            counter
//   ddprund_sent_bytes_total                counter
//   ddprund_request_duration_seconds        histogram  (store_stats.hpp says what is measured)
//   ddprund_keys                            gauge    keys and queues held
//   ddprund_status_snapshot_seconds         gauge    io-thread time of the last status snapshot
//   process_resident_memory_bytes           gauge
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
//
// Thread safety: pure functions.
#pragma once

#include <string>
#include <vector>

#include "rendezvous/server/http_job_view.hpp"
#include "rendezvous/server/store_stats.hpp"

namespace ddp {

// The ddprund_* families, from a snapshot; `residentBytes` 0 leaves the process family out.
std::string storeMetricsText(const StoreSnapshot& snapshot, std::size_t residentBytes);

// The ddprun_* families of `jobs`.
std::string jobMetricsText(const std::vector<JobView>& jobs);

// Resident set size of this process (from /proc/self/statm), 0 when unknown.
std::size_t residentMemoryBytes();

}  // namespace ddp
