#include "launcher/cli/cli_detect.hpp"

#include "launcher/cli/cli.hpp"
#include "rendezvous/base/endpoint.hpp"
#include "launcher/cli/slurm_env.hpp"

namespace ddp::detail {
namespace {

bool given(const LaunchConfig& c, const char* dest) { return c.explicitOptions.contains(dest); }

// Rendezvous settings for a dynamic backend (c10d) or the static one.
std::string fillRendezvous(LaunchConfig& c, const SlurmContext& ctx) {
  std::string filled;
  const std::string source = ctx.portOverridden ? "Slurm (DDP_SLURM_PORT)" : "Slurm";
  if (!given(c, "rdzv_backend")) c.rdzvBackend = RdzvBackend::kC10d;
  if (c.rdzvBackend == RdzvBackend::kStatic) {
    if (!given(c, "master_addr")) c.masterAddr = ctx.firstHost;
    if (!given(c, "master_port")) c.masterPort = ctx.port;
    if (!given(c, "rdzv_endpoint")) c.rdzvEndpointSource = source;
    return " master " + formatEndpoint({c.masterAddr, c.masterPort.value_or(ctx.port)});
  }
  if (c.rdzvBackend == RdzvBackend::kC10d && !given(c, "rdzv_endpoint")) {
    // Typed, never text: finalizeRendezvous keeps it (rdzvEndpoint stays "", as nothing was given).
    c.rdzvEndpoints = {{ctx.firstHost, ctx.port}};
    c.rdzvEndpointSource = source;
    if (!c.rdzvConf.isHost) c.rdzvConf.isHost = ctx.nodeRank == 0;
    filled += " endpoint " + formatEndpoint(c.rdzvEndpoints.front()) +
              (ctx.nodeRank == 0 ? " (hosted here)" : "");
  }
  if (!given(c, "rdzv_id")) {
    c.rdzvId = ctx.runId;
    c.rdzvIdSource = "Slurm";
    filled += " run id " + ctx.runId;
  }
  return filled;
}

}  // namespace

void applySlurmDetection(LaunchConfig& c, const EnvLookup& getenv) {
  SlurmContext ctx;
  try {
    ctx = slurmContextFrom(getenv);
  } catch (const ConfigError& e) {
    throw UsageError(std::string(e.what()) + " (or run with --no-slurm)");
  }
  if (!ctx.inSlurm || !ctx.inStep) return;
  c.slurmHosts = ctx.hosts;
  if (ctx.localTask > 0)
    throw UsageError("SLURM_LOCALID=" + std::to_string(ctx.localTask) +
                     ": ddprun runs one agent per node and starts the workers itself; use srun "
                     "--ntasks-per-node=1 (or --no-slurm)");
  std::string filled;
  if (!given(c, "nnodes")) {
    c.minNodes = c.maxNodes = ctx.nnodes;
    filled += " nnodes " + std::to_string(ctx.nnodes);
  }
  if (!given(c, "node_rank") && c.minNodes < c.maxNodes) {
    // Elastic: a lost node must not leave a hole in fixed ranks; SLURM_NODEID only orders nodes.
    c.nodeOrder = ctx.nodeRank;
    filled += " node order " + std::to_string(ctx.nodeRank) + " (elastic: ranks assigned by the rendezvous)";
  } else if (!given(c, "node_rank")) {
    c.nodeRank = ctx.nodeRank;
    filled += " node rank " + std::to_string(ctx.nodeRank);
  }
  filled += fillRendezvous(c, ctx);
  c.notes.push_back(describe(ctx) + (filled.empty() ? "; everything set explicitly" : ";" + filled));
}

}  // namespace ddp::detail
