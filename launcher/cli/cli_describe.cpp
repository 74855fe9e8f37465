#include "launcher/cli/cli_describe.hpp"

#include <nlohmann/json.hpp>

#include "launcher/cli/cli_values.hpp"
#include "rendezvous/base/endpoint.hpp"

namespace ddp::detail {
namespace {

using nlohmann::json;

json streams(const StreamSpec& spec) {
  if (spec.perRank.empty()) return std::to_string(static_cast<int>(spec.all));
  std::string text;
  for (const auto& [rank, s] : spec.perRank)
    text += (text.empty() ? "" : ",") + std::to_string(rank) + ":" + std::to_string(static_cast<int>(s));
  return text;
}

template <class T>
json orNull(const std::optional<T>& value) {
  return value ? json(*value) : json(nullptr);
}

const char* kindName(EntrypointKind kind) {
  switch (kind) {
    case EntrypointKind::kPythonScript: return "python_script";
    case EntrypointKind::kPythonModule: return "python_module";
    case EntrypointKind::kProgram: return "program";
  }
  return "unknown";
}

// Every resolved rendezvous timing and --rdzv-conf value (durations in ms).
json rdzvSettings(const RendezvousSettings& s, const RdzvConf& c) {
  return {{"join_timeout_ms", s.joinTimeout.count()},
          {"last_call_timeout_ms", s.lastCallTimeout.count()},
          {"close_timeout_ms", s.closeTimeout.count()},
          {"heartbeat_timeout_ms", s.heartbeatTimeout.count()},
          {"keep_alive_interval_ms", s.keepAliveInterval.count()},
          {"keep_alive_max_attempt", s.keepAliveMaxAttempt},
          {"read_timeout_ms", c.readTimeout.count()},
          {"connect_timeout_ms", c.connectTimeout.count()},
          {"exit_barrier_timeout_ms", c.exitBarrierTimeout.count()},
          {"is_host", orNull(c.isHost)},
          {"protocol", c.protocol},
          {"etcd_prefix", c.etcdPrefix},
          {"request_timeout_ms", c.etcdRequestTimeout.count()},
          {"retry_timeout_ms", c.etcdRetryTimeout.count()},
          {"token_file", c.tokenFile},
          {"tls_ca", c.tls.caFile},
          {"tls_cert", c.tls.certFile},
          {"tls_key", c.tls.keyFile},
          {"store_allow", c.storeAllow.describe()},
          {"store_unverified_local", c.storeAcceptUnverifiedLocal ? "accept" : "refuse"}};
}

const char* preflightName(PreflightMode mode) {
  switch (mode) {
    case PreflightMode::kOff: return "off";
    case PreflightMode::kWarn: return "warn";
    case PreflightMode::kStrict: return "strict";
  }
  return "unknown";
}

json numaPlan(const NumaSetup* numa) {
  if (numa == nullptr || numa->policy == NumaPolicy::kNone) return nullptr;
  json workers = json::array();
  for (const auto& w : numa->plan.workers) {
    workers.push_back({{"local_rank", w.localRank}, {"gpu", orNull(w.gpu)}, {"node", orNull(w.node)},
                       {"cpus", formatIndexList(w.cpus)}, {"mem_nodes", formatIndexList(w.memNodes)},
                       {"note", w.note}});
  }
  return {{"topology", numa->topologySource}, {"this_system", numa->thisSystem},
          {"gpus", numa->gpuSource}, {"outcome", numa->outcome},
          {"usable_cpus", formatIndexList(numa->plan.usableCpus)}, {"workers", workers},
          {"lines", numa->lines}};
}

json endpoints(const std::vector<Endpoint>& list) {
  json out = json::array();
  for (const auto& e : list) out.push_back(formatEndpoint(e));
  return out;
}

}  // namespace

std::string describeConfig(const LaunchConfig& c, const NumaSetup* numa) {
  json signals = json::array();
  for (int s : c.signalsToHandle) signals.push_back(signalName(s));
  json out = {
      {"min_nodes", c.minNodes}, {"max_nodes", c.maxNodes}, {"nproc_per_node", c.nprocPerNode},
      {"nproc_spec", c.nprocSpec}, {"rdzv_backend", backendName(c.rdzvBackend)},
      {"rdzv_endpoint", c.rdzvEndpoint}, {"rdzv_endpoints", endpoints(c.rdzvEndpoints)},
      {"rdzv_endpoint_source", c.rdzvEndpointSource},
      {"rdzv_host", c.rdzvEndpoints.empty() ? "" : c.rdzvEndpoints.front().host},
      {"rdzv_port", c.rdzvEndpoints.empty() ? 0 : c.rdzvEndpoints.front().port},
      {"rdzv_id", c.rdzvId}, {"rdzv_id_source", c.rdzvIdSource}, {"rdzv", rdzvSettings(c.rdzv, c.rdzvConf)},
      {"standalone", c.standalone}, {"max_restarts", c.maxRestarts},
      {"standby_workers", c.standbyWorkers},
      {"verdict_after", c.verdictAfter},
      {"exclude_after", c.excludeAfter},
      {"exclude_window_ms", c.excludeWindow.count()},
      {"exclude_cooldown_ms", c.excludeCooldown.count()},
      {"restart_scope", c.restartScope == RestartScope::kFailed ? "failed" : "all"},
      {"monitor_interval", c.monitorInterval}, {"role", c.role}, {"module", c.module},
      {"no_python", c.noPython}, {"run_path", c.runPath}, {"python_path", c.pythonPath}, {"log_dir", c.logDir},
      {"redirects", streams(c.redirects)}, {"tee", streams(c.tee)},
      {"local_ranks_filter", c.localRanksFilter}, {"log_prefix", c.logPrefix},
      {"log_level", c.logLevel}, {"signals_to_handle", signals},
      {"shutdown_timeout_ms", c.shutdownTimeout.count()}, {"local_addr", c.localAddr},
      {"hang_timeout_ms", c.hangTimeout.count()}, {"file_timer", c.fileTimer},
      {"timer_file", c.timerFile},
      {"straggler_threshold", c.stragglerThreshold},
      {"straggler_window_ms", c.stragglerWindow.count()},
      {"exclude_stragglers", c.excludeStragglers},
      {"master_addr", c.masterAddr}, {"master_port", orNull(c.masterPort)},
      {"node_rank", orNull(c.nodeRank)}, {"node_order", orNull(c.nodeOrder)}, {"virtual_local_rank", c.virtualLocalRank},
      {"numa_binding", c.numaBinding == NumaPolicy::kNone ? json(nullptr) : json(numaPolicyName(c.numaBinding))},
      {"numa_plan", numaPlan(numa)},
      {"start_method", c.startMethod}, {"no_slurm", c.noSlurm},
      {"preflight", preflightName(c.preflight)},
      {"http_port", c.httpPort == LaunchConfig::kHttpPortAuto ? json("auto") : json(c.httpPort)},
      {"http_host", c.httpHost}, {"command", c.command},
      {"entrypoint", c.entrypointName}, {"entrypoint_kind", kindName(c.entrypointKind)},
      {"explicit_options", c.explicitOptions}, {"notes", c.notes}, {"warnings", c.warnings}};
  return out.dump(2) + "\n";
}

}  // namespace ddp::detail
