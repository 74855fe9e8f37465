#include "launcher/cli/slurm_env.hpp"

#include <charconv>
#include <cstdlib>
#include <initializer_list>

#include "launcher/cli/slurm_nodelist.hpp"
#include "rendezvous/base/error.hpp"

namespace ddp {
namespace {

struct Found {
  std::string name;
  std::string value;
};

// The first of `names` that is set and non-empty.
std::optional<Found> firstOf(const EnvLookup& env, std::initializer_list<const char*> names) {
  for (const char* name : names) {
    std::optional<std::string> value = env(name);
    if (value && !value->empty()) return Found{name, *value};
  }
  return std::nullopt;
}

int64_t parseInt(const Found& found, int64_t lo, int64_t hi) {
  int64_t value = 0;
  const char* begin = found.value.data();
  const char* end = begin + found.value.size();
  auto [ptr, ec] = std::from_chars(begin, end, value);
  if (ec != std::errc() || ptr != end || value < lo || value > hi) {
    throw ConfigError(found.name + "='" + found.value + "' is not an integer in [" +
                      std::to_string(lo) + ", " + std::to_string(hi) + "]");
  }
  return value;
}

// Step ids are numeric in a step; "batch"/"extern" elsewhere count as 0 for the port rule.
int64_t numericOrZero(const std::string& text) {
  int64_t value = 0;
  auto [ptr, ec] = std::from_chars(text.data(), text.data() + text.size(), value);
  return (ec == std::errc() && ptr == text.data() + text.size() && value >= 0) ? value : 0;
}

uint16_t portFor(const EnvLookup& env, const std::string& jobId, const std::string& stepId) {
  if (std::optional<Found> port = firstOf(env, {"DDP_SLURM_PORT"})) {
    return static_cast<uint16_t>(parseInt(*port, 1, 65535));
  }
  const int64_t index = numericOrZero(jobId) % kSlurmPortSpan +
                        kSlurmPortStepFactor * (numericOrZero(stepId) % kSlurmPortSpan);
  return static_cast<uint16_t>(kSlurmPortBase + index % kSlurmPortSpan);
}

}  // namespace

SlurmContext slurmContextFrom(const EnvLookup& env) {
  SlurmContext context;
  std::optional<Found> jobId = firstOf(env, {"SLURM_JOB_ID", "SLURM_JOBID"});
  if (!jobId) return context;
  context.inSlurm = true;
  std::optional<Found> stepId = firstOf(env, {"SLURM_STEP_ID", "SLURM_STEPID"});
  context.inStep = stepId.has_value();

  std::optional<Found> nodelist =
      context.inStep ? firstOf(env, {"SLURM_STEP_NODELIST", "SLURM_JOB_NODELIST", "SLURM_NODELIST"})
                     : firstOf(env, {"SLURM_JOB_NODELIST", "SLURM_NODELIST"});
  if (!nodelist) {
    throw ConfigError("SLURM_JOB_ID=" + jobId->value +
                      " is set but no node list is (SLURM_STEP_NODELIST, SLURM_JOB_NODELIST)");
  }
  context.hosts = expandSlurmNodelist(nodelist->value);
  if (context.hosts.empty()) throw ConfigError(nodelist->name + " is blank");
  context.firstHost = context.hosts.front();

  std::optional<Found> nnodes =
      context.inStep ? firstOf(env, {"SLURM_STEP_NUM_NODES", "SLURM_JOB_NUM_NODES", "SLURM_NNODES"})
                     : firstOf(env, {"SLURM_JOB_NUM_NODES", "SLURM_NNODES"});
  context.nnodes = static_cast<int>(context.hosts.size());
  if (nnodes) {
    int64_t n = parseInt(*nnodes, 1, static_cast<int64_t>(kMaxSlurmHosts));
    if (n != context.nnodes) {
      throw ConfigError(nnodes->name + "=" + nnodes->value + " disagrees with " + nodelist->name +
                        "='" + nodelist->value + "' (" + std::to_string(context.nnodes) + " hosts)");
    }
  }
  if (std::optional<Found> nodeId = firstOf(env, {"SLURM_NODEID"})) {
    context.nodeRank = static_cast<int>(parseInt(*nodeId, 0, context.nnodes - 1));
  }
  if (std::optional<Found> localId = firstOf(env, {"SLURM_LOCALID"})) {
    context.localTask = static_cast<int>(parseInt(*localId, 0, 1 << 20));
  }
  context.runId = context.inStep ? jobId->value + "." + stepId->value : jobId->value;
  context.port = portFor(env, jobId->value, stepId ? stepId->value : std::string());
  context.portOverridden = firstOf(env, {"DDP_SLURM_PORT"}).has_value();
  return context;
}

SlurmContext slurmContextFrom(const std::map<std::string, std::string>& env) {
  return slurmContextFrom([&env](const std::string& name) -> std::optional<std::string> {
    auto it = env.find(name);
    if (it == env.end()) return std::nullopt;
    return it->second;
  });
}

SlurmContext slurmContextFromEnvironment() {
  return slurmContextFrom(processEnv);
}

std::string describe(const SlurmContext& context) {
  if (!context.inSlurm) return "not in a Slurm job";
  std::string out = "Slurm " + std::string(context.inStep ? "step " : "job ") + context.runId +
                    ": node " + std::to_string(context.nodeRank) + " of " +
                    std::to_string(context.nnodes) + " (first host " + context.firstHost +
                    "), rendezvous " + context.firstHost + ":" + std::to_string(context.port);
  if (context.localTask > 0) {
    out += "; warning: SLURM_LOCALID=" + std::to_string(context.localTask) +
           ", run one ddprun per node (srun --ntasks-per-node=1)";
  }
  return out;
}

}  // namespace ddp
