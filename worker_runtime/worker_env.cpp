#include "worker_runtime/worker_env.hpp"

#include <charconv>
#include <cstdlib>
#include <limits>
#include <optional>

#include "rendezvous/base/error.hpp"

namespace ddp {
namespace {

std::optional<std::string> readVar(const char* name) {
  const char* value = std::getenv(name);
  if (value == nullptr) return std::nullopt;
  return std::string(value);
}

std::string requireVar(const char* name) {
  auto value = readVar(name);
  if (!value) {
    throw ConfigError(std::string("environment variable ") + name +
                      " is not set (a worker must be started by ddprun/torchrun or given the "
                      "torchrun env contract)");
  }
  if (value->empty()) throw ConfigError(std::string(name) + " is set but empty");
  return *value;
}

int64_t parseInteger(const char* name, const std::string& text, int64_t min, int64_t max) {
  int64_t value = 0;
  const char* end = text.data() + text.size();
  auto [ptr, ec] = std::from_chars(text.data(), end, value);
  if (ec == std::errc::result_out_of_range) {
    throw ConfigError(std::string(name) + "='" + text + "' is out of range");
  }
  if (ec != std::errc() || ptr != end || text.empty()) {
    throw ConfigError(std::string(name) + "='" + text + "' is not an integer");
  }
  if (value < min || value > max) {
    throw ConfigError(std::string(name) + "=" + text + " must be in [" + std::to_string(min) +
                      ", " + std::to_string(max) + "]");
  }
  return value;
}

int requireInt(const char* name, int64_t min, int64_t max = std::numeric_limits<int>::max()) {
  return static_cast<int>(parseInteger(name, requireVar(name), min, max));
}

int optionalInt(const char* name, int fallback, int64_t min,
                int64_t max = std::numeric_limits<int>::max()) {
  auto value = readVar(name);
  if (!value || value->empty()) return fallback;
  return static_cast<int>(parseInteger(name, *value, min, max));
}

void requireLess(const char* name, int value, const char* boundName, int bound) {
  if (value >= bound) {
    throw ConfigError(std::string(name) + "=" + std::to_string(value) + " must be < " + boundName +
                      "=" + std::to_string(bound));
  }
}

void readTopology(WorkerEnv& env) {
  env.worldSize = requireInt("WORLD_SIZE", 1);
  env.rank = requireInt("RANK", 0);
  requireLess("RANK", env.rank, "WORLD_SIZE", env.worldSize);
  env.localWorldSize = optionalInt("LOCAL_WORLD_SIZE", env.worldSize, 1);
  if (env.localWorldSize > env.worldSize) {
    throw ConfigError("LOCAL_WORLD_SIZE=" + std::to_string(env.localWorldSize) +
                      " must be <= WORLD_SIZE=" + std::to_string(env.worldSize));
  }
  env.localRank = optionalInt("LOCAL_RANK", env.rank % env.localWorldSize, 0);
  requireLess("LOCAL_RANK", env.localRank, "LOCAL_WORLD_SIZE", env.localWorldSize);
  env.groupWorldSize = optionalInt("GROUP_WORLD_SIZE", 1, 1);
  env.groupRank = optionalInt("GROUP_RANK", 0, 0);
  requireLess("GROUP_RANK", env.groupRank, "GROUP_WORLD_SIZE", env.groupWorldSize);
}

void readMaster(WorkerEnv& env) {
  env.master.host = requireVar("MASTER_ADDR");
  env.master.port = static_cast<int>(parseInteger("MASTER_PORT", requireVar("MASTER_PORT"), 1,
                                                  std::numeric_limits<uint16_t>::max()));
}

void readElastic(WorkerEnv& env) {
  env.restartCount = optionalInt("TORCHELASTIC_RESTART_COUNT", 0, 0);
  env.maxRestarts = optionalInt("TORCHELASTIC_MAX_RESTARTS", 0, 0);
  env.runId = readVar("TORCHELASTIC_RUN_ID").value_or("");
  env.errorFile = readVar("TORCHELASTIC_ERROR_FILE").value_or("");
  auto useAgentStore = readVar("TORCHELASTIC_USE_AGENT_STORE").value_or("False");
  if (useAgentStore != "True" && useAgentStore != "False" && !useAgentStore.empty()) {
    throw ConfigError("TORCHELASTIC_USE_AGENT_STORE='" + useAgentStore +
                      "' must be 'True' or 'False'");
  }
  env.useAgentStore = useAgentStore == "True";
  env.quorumBoard = readVar("DDP_QUORUM_BOARD").value_or("");
  if (!env.quorumBoard.empty()) {
    env.quorumSlot = optionalInt("DDP_QUORUM_SLOT", env.localRank, 0);
  }
  env.stateFromPeer = readVar("DDP_STATE_FROM_PEER").value_or("") == "1";
}

}  // namespace

WorkerEnv WorkerEnv::fromEnvironment() {
  WorkerEnv env;
  readTopology(env);
  readMaster(env);
  readElastic(env);
  return env;
}

}  // namespace ddp
