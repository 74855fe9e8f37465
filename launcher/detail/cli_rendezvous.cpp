#include "launcher/detail/cli_rendezvous.hpp"

#include <cstdio>
#include <random>

#include "launcher/cli.hpp"
#include "launcher/detail/cli_values.hpp"
#include "launcher/detail/rdzv_conf.hpp"
#include "launcher/rdzv_endpoint.hpp"

namespace ddp::detail {
namespace {

std::string randomRunId() {
  std::random_device rd;
  std::mt19937_64 gen((static_cast<std::uint64_t>(rd()) << 32) ^ rd());
  std::uint64_t hi = gen(), lo = gen();
  hi = (hi & ~0xF000ULL) | 0x4000ULL;              // version 4
  lo = (lo & ~(0xC0ULL << 56)) | (0x80ULL << 56);  // RFC 4122 variant
  char buf[40];
  std::snprintf(buf, sizeof(buf), "%08llx-%04llx-%04llx-%04llx-%012llx",
                static_cast<unsigned long long>(hi >> 32), static_cast<unsigned long long>((hi >> 16) & 0xFFFF),
                static_cast<unsigned long long>(hi & 0xFFFF), static_cast<unsigned long long>(lo >> 48),
                static_cast<unsigned long long>(lo & 0xFFFFFFFFFFFFULL));
  return buf;
}

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
  throw UsageError(std::string("--rdzv-id is required for a multi-node ") + backendName(c.rdzvBackend) +
                   " job (nnodes " + nodeRange(c) +
                   "): every job on one store needs its own id (or run under Slurm, or set "
                   "TORCHELASTIC_RUN_ID or PET_RDZV_ID)");
}

}  // namespace

void applyStandalone(LaunchConfig& c, const std::string& origin) {
  const bool implicit = !c.standalone && c.rdzvBackend == RdzvBackend::kStatic &&
                        !c.explicitOptions.contains("rdzv_endpoint") && !c.masterPort && c.maxNodes == 1;
  if (!c.standalone && !implicit) return;
  if (c.maxNodes > 1)
    throw UsageError(origin + " runs exactly one node, but nnodes is " + nodeRange(c));
  c.standalone = true;
  c.minNodes = c.maxNodes = 1;
  c.rdzvBackend = RdzvBackend::kC10d;
  c.rdzvEndpoint = "localhost:0";
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
  c.rdzv = settings;
}

}  // namespace ddp::detail
