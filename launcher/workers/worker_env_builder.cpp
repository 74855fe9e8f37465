#include "launcher/workers/worker_env_builder.hpp"

#include "ddp_version.hpp"
#include "launcher/numa/virtual_devices.hpp"

#include <utility>

extern char** environ;

namespace ddp {
namespace {

std::string lookup(const EnvMap& env, const std::string& key, const std::string& fallback) {
  auto it = env.find(key);
  return it == env.end() ? fallback : it->second;
}

// torch 2.x reads TORCH_NCCL_ASYNC_ERROR_HANDLING, torch 1.13 NCCL_ASYNC_ERROR_HANDLING; each gets
// the parent's value of either spelling, else "1".
void setAsyncErrorHandling(EnvMap& env, const EnvMap& parent) {
  const std::string kNew = "TORCH_NCCL_ASYNC_ERROR_HANDLING";
  const std::string kOld = "NCCL_ASYNC_ERROR_HANDLING";
  env[kNew] = lookup(parent, kNew, lookup(parent, kOld, "1"));
  env[kOld] = lookup(parent, kOld, lookup(parent, kNew, "1"));
}

// --virtual-local-rank: every worker sees LOCAL_RANK=0 and only its own device
// (virtual_devices.hpp; the command line refused a local rank without one).
void setVirtualLocalRank(EnvMap& env, const EnvMap& parent, int localRank) {
  env["LOCAL_RANK"] = "0";
  auto it = parent.find("CUDA_VISIBLE_DEVICES");
  const auto device = virtualDevice(
      it == parent.end() ? std::nullopt : std::optional<std::string>(it->second), localRank);
  if (device) env["CUDA_VISIBLE_DEVICES"] = *device;
}

// The ddprun Python package's folder first (a worker imports the package of the agent that
// started it), the user's own PYTHONPATH after it.
void prependPythonPath(EnvMap& env, const EnvMap& parent, const std::string& folder) {
  const std::string users = lookup(parent, "PYTHONPATH", "");
  env["PYTHONPATH"] = users.empty() ? folder : folder + ":" + users;
}

}  // namespace

EnvMap currentEnvironment() {
  EnvMap env;
  for (char** entry = environ; entry != nullptr && *entry != nullptr; ++entry) {
    std::string kv(*entry);
    auto eq = kv.find('=');
    if (eq == std::string::npos || eq == 0) continue;
    env.emplace(kv.substr(0, eq), kv.substr(eq + 1));
  }
  return env;
}

std::string substituteLocalRank(const std::string& arg, int localRank) {
  static const std::string kMacro = "${local_rank}";
  std::string out = arg;
  for (auto pos = out.find(kMacro); pos != std::string::npos; pos = out.find(kMacro, pos + 1)) {
    out.replace(pos, kMacro.size(), std::to_string(localRank));
  }
  return out;
}

WorkerEnvBuilder::WorkerEnvBuilder(const LaunchConfig& config, std::string runId, EnvMap parentEnv)
    : config_(config), runId_(std::move(runId)), parentEnv_(std::move(parentEnv)) {}

bool WorkerEnvBuilder::ompThreadsDefaulted() const {
  return config_.nprocPerNode > 1 && parentEnv_.find("OMP_NUM_THREADS") == parentEnv_.end();
}

WorkerSpec WorkerEnvBuilder::build(int localRank, const RendezvousResult& round,
                                   const WorkerStoreAddress& store,
                                   const std::string& errorFile) const {
  WorkerSpec spec;
  spec.layout() = layoutOf(round, localRank, config_.nprocPerNode);
  spec.roleRank = round.baseRoleRank + localRank;
  spec.errorFile = errorFile;
  for (const auto& arg : config_.command) spec.argv.push_back(substituteLocalRank(arg, localRank));

  EnvMap& env = spec.env;
  env = parentEnv_;
  env["LOCAL_RANK"] = std::to_string(spec.localRank);
  env["RANK"] = std::to_string(spec.rank);
  env["GROUP_RANK"] = std::to_string(spec.groupRank);
  env["ROLE_RANK"] = std::to_string(spec.roleRank);
  env["ROLE_NAME"] = config_.role;
  env["LOCAL_WORLD_SIZE"] = std::to_string(spec.localWorldSize);
  env["WORLD_SIZE"] = std::to_string(spec.worldSize);
  env["GROUP_WORLD_SIZE"] = std::to_string(spec.groupWorldSize);
  env["ROLE_WORLD_SIZE"] = std::to_string(round.roleWorldSize);
  env["MASTER_ADDR"] = store.addr;
  env["MASTER_PORT"] = std::to_string(store.port);
  env["TORCHELASTIC_RESTART_COUNT"] = std::to_string(round.generation);
  env["TORCHELASTIC_MAX_RESTARTS"] = std::to_string(config_.maxRestarts);
  env["TORCHELASTIC_RUN_ID"] = runId_;
  env["TORCHELASTIC_USE_AGENT_STORE"] = "True";
  env["TORCHELASTIC_ERROR_FILE"] = errorFile;
  env["DDP_AGENT_VERSION"] = DDP_VERSION_STRING;
  if (!config_.pythonPath.empty()) prependPythonPath(env, parentEnv_, config_.pythonPath);
  setAsyncErrorHandling(env, parentEnv_);
  if (ompThreadsDefaulted()) env["OMP_NUM_THREADS"] = "1";
  if (config_.virtualLocalRank) setVirtualLocalRank(env, parentEnv_, localRank);
  return spec;
}

}  // namespace ddp
