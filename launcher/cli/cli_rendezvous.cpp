#include "launcher/cli/cli_rendezvous.hpp"

#include "launcher/cli/cli.hpp"
#include "launcher/cli/cli_values.hpp"
#include "launcher/cli/rdzv_conf.hpp"
#include "launcher/config/run_id.hpp"
#include "rendezvous/base/endpoint.hpp"

namespace ddp::detail {
namespace {

std::string nodeRange(const LaunchConfig& c) {
  return std::to_string(c.minNodes) + ":" + std::to_string(c.maxNodes);
}

// Parses with `parse`, naming `origin` and the text in a UsageError.
template <class Parse>
auto named(const std::string& origin, const std::string& text, Parse parse) {
  try {
    return parse();
  } catch (const ConfigError& e) {
    throw UsageError(origin + " '" + text + "': " + e.what());
  }
}

void resolveStaticEndpoint(LaunchConfig& c) {
  if (!c.rdzvEndpoint.empty()) {
    // torchrun's static handler: "Port is absent in endpoint" without one.
    c.rdzvEndpoints = {named(c.rdzvEndpointSource, c.rdzvEndpoint, [&] {
      try {
        return parseEndpoint(c.rdzvEndpoint, std::nullopt);
      } catch (const ConfigError& e) {
        throw ConfigError(std::string(e.what()) + " (the static backend's endpoint is node 0's store)");
      }
    })};
    return;
  }
  const std::string host = named("--master-addr", c.masterAddr, [&] { return parseHost(c.masterAddr); });
  c.rdzvEndpoints = {{host, c.masterPort.value_or(kDefaultMasterPort)}};
  const bool flags = c.explicitOptions.contains("master_addr") || c.explicitOptions.contains("master_port");
  if (c.rdzvEndpointSource == "default" && flags) c.rdzvEndpointSource = "--master-addr/--master-port";
}

void resolveEndpoints(LaunchConfig& c) {
  if (c.standalone) {
    c.rdzvEndpoints = {{"localhost", 0}};
    c.rdzvEndpointSource = "standalone";
    return;
  }
  const int port = defaultPortFor(c.rdzvBackend);
  switch (c.rdzvBackend) {
    case RdzvBackend::kStatic:
      return resolveStaticEndpoint(c);
    case RdzvBackend::kC10d:
      if (c.rdzvEndpoint.empty() && !c.rdzvEndpoints.empty()) return;  // from Slurm detection
      if (c.rdzvEndpoint.empty() && c.maxNodes > 1)
        throw UsageError("--rdzv-endpoint is required when more than one node may join (nnodes " +
                         nodeRange(c) + "); otherwise every node would wait alone on its own store");
      c.rdzvEndpoints = {c.rdzvEndpoint.empty()
                             ? Endpoint{"localhost", port}
                             : named(c.rdzvEndpointSource, c.rdzvEndpoint,
                                     [&] { return parseEndpoint(c.rdzvEndpoint, port); })};
      return;
    case RdzvBackend::kEtcd:
    case RdzvBackend::kEtcdV2:
      c.rdzvEndpoints = c.rdzvEndpoint.empty()
                            ? std::vector<Endpoint>{{"localhost", port}}
                            : named(c.rdzvEndpointSource, c.rdzvEndpoint,
                                    [&] { return parseEndpointList(c.rdzvEndpoint, port); });
      return;
  }
}

// torchrun's default: no id (or an empty one) is "none", on every backend. A multi-node job on a
// shared store takes its scheduler's id when there is one; two jobs that still meet under one id
// are told apart by their fingerprint (jobFingerprint below).
void resolveRunId(LaunchConfig& c, const EnvLookup& getenv) {
  const bool shared = c.rdzvBackend != RdzvBackend::kStatic && !c.standalone && c.maxNodes > 1;
  if (c.rdzvIdSource != "default" || !shared) return;
  std::vector<const char*> schedulers = {"TORCHELASTIC_RUN_ID"};
  if (!c.noSlurm) schedulers.push_back("SLURM_JOB_ID");
  for (const char* var : schedulers) {
    if (auto id = getenv(var); id && !id->empty()) {
      c.rdzvId = *id;
      c.rdzvIdSource = var;
      c.notes.push_back(std::string("run id ") + *id + " from " + var + " (no --rdzv-id given)");
      return;
    }
  }
  c.notes.push_back("run id " + c.rdzvId + " (torchrun's default: no --rdzv-id given); a job with "
                    "another entry point or node range under this id on the same store is refused");
}

// The entry point as every node names it: a script or program by its file name (nodes may spell
// the path differently), a module by its name.
std::string entryName(const LaunchConfig& c) {
  if (c.entrypointKind == EntrypointKind::kPythonModule) return "-m " + c.entrypointName;
  const auto slash = c.entrypointName.find_last_of('/');
  return slash == std::string::npos ? c.entrypointName : c.entrypointName.substr(slash + 1);
}

}  // namespace

std::string jobFingerprint(const LaunchConfig& c) {
  std::string entry = entryName(c);
  // A file name is at most 255 bytes; a module name has no such bound.
  if (entry.size() > kMaxJobFingerprint / 2) entry = entry.substr(0, kMaxJobFingerprint / 2) + "...";
  return entry + ", nnodes " + nodeRange(c);
}

void applyStandalone(LaunchConfig& c, const std::string& origin) {
  const bool implicit = !c.standalone && c.rdzvBackend == RdzvBackend::kStatic &&
                        !c.explicitOptions.contains("rdzv_endpoint") && !c.masterPort && c.maxNodes == 1;
  if (!c.standalone && !implicit) return;
  if (c.maxNodes > 1)
    throw UsageError(origin + " runs exactly one node, but nnodes is " + nodeRange(c));
  c.standalone = true;
  c.minNodes = c.maxNodes = 1;
  c.rdzvBackend = RdzvBackend::kC10d;
  c.rdzvEndpoint.clear();  // ignored: the store is this process's own, on a free port
  if (!c.explicitOptions.contains("rdzv_id")) {
    c.rdzvId = randomRunId();
    c.rdzvIdSource = "random (standalone)";
  }
  c.notes.push_back(std::string(implicit ? "single node without --master-port: " : "") +
                    "standalone: one node, rendezvous store in this process, run id " +
                    c.rdzvId);
}

void finalizeRendezvous(LaunchConfig& c, const std::map<std::string, std::string>& rdzvConf,
                        const EnvLookup& getenv) {
  resolveEndpoints(c);
  resolveRunId(c, getenv);
  RendezvousSettings settings = defaultRendezvousSettings(c.rdzvBackend);
  applyRdzvConf(rdzvConf, settings, c.rdzvConf);  // checked when read: only the defaults differ
  const bool https = c.rdzvEndpoint.find("https://") != std::string::npos;
  if (https && !c.rdzvConf.tls.enabled())
    throw UsageError(c.rdzvEndpointSource + " '" + c.rdzvEndpoint +
                     "': https needs --rdzv-conf tls_ca=<CA file> (the CA that signed etcd's certificate)");
  if (c.rdzvConf.tokenFile.empty()) {
    if (auto file = getenv("DDP_RDZV_TOKEN_FILE"); file && !file->empty()) c.rdzvConf.tokenFile = *file;
  }
  settings.runId = c.rdzvId;
  settings.minNodes = c.minNodes;
  settings.maxNodes = c.maxNodes;
  settings.maxRestarts = c.maxRestarts;
  // Workers that keep running across rounds want the next round at once (docs/recovery.md).
  settings.closeOnceAccounted = c.restartScope == RestartScope::kFailed;
  settings.jobFingerprint = jobFingerprint(c);
  c.rdzv = settings;
}

}  // namespace ddp::detail
