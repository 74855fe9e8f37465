// WorkerEnvBuilder: turns the resolved flags, one rendezvous round and the worker store's address
// into each local worker's argv and environment — exactly torchrun's env contract
// (docs/running.md#worker-environment-exactly-torchruns), the agent's own environment
// inherited underneath — plus DDP_AGENT_VERSION (this ddprun's version: the ddprun Python package
// knows by it that a ddprun agent started the process) and the ddprun Python package's folder
// first on PYTHONPATH (LaunchConfig::pythonPath, when found; the user's PYTHONPATH after it).
//
// Pure: no I/O, no logging; the agent says once that OMP_NUM_THREADS was defaulted
// (ompThreadsDefaulted()).
//
// Thread safety: a plain value; const methods may be called from any thread.
#pragma once

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "launcher/config/launch_config.hpp"
#include "launcher/numa/cpu_binding.hpp"
#include "launcher/workers/terminal.hpp"
#include "rendezvous/algorithm/rendezvous.hpp"
#include "rendezvous/base/rank_layout.hpp"

namespace ddp {

// Environment as an ordered map (deterministic exec order, easy to test).
using EnvMap = std::map<std::string, std::string>;

// The calling process's environment (environ).
EnvMap currentEnvironment();

// One worker of this node for one generation: what to exec, with which env, and its ranks.
// RANK, WORLD_SIZE, LOCAL_RANK, LOCAL_WORLD_SIZE, GROUP_RANK and GROUP_WORLD_SIZE are the
// RankLayout it embeds, the numbers its env holds — except with --virtual-local-rank, where the
// env says LOCAL_RANK=0 and localRank stays the worker's real local rank.
struct WorkerSpec : RankLayout {
  int roleRank = 0;  // ROLE_RANK
  std::vector<std::string> argv;  // argv[0] is looked up on PATH when it has no '/'
  EnvMap env;                     // the complete environment of the worker
  std::string errorFile;          // TORCHELASTIC_ERROR_FILE ("" = none)
  std::optional<CpuBinding> binding;  // --numa-binding, applied before exec (none: unbound)
  WorkerTerminal terminal;  // its share of ddprun's terminal (none: own group, pipes)
  // A file of the agent's that goes with this process ("" = none; a standby's FIFO): its guardian
  // unlinks it when it exits, and removes the file's folder, if empty, once the agent died
  // (guardian.hpp), so that nothing is left behind even after kill -9 of the agent.
  std::string ownedFile;
  // Put under SCHED_IDLE by its guardian once it runs its program (a standby that prepares:
  // idle_priority.hpp); false: the agent's policy.
  bool idlePriority = false;
};

// Where the generation's worker store listens (MASTER_ADDR / MASTER_PORT).
struct WorkerStoreAddress {
  std::string addr;
  uint16_t port = 0;
};

class WorkerEnvBuilder {
 public:
  // `parentEnv` is the agent's environment (inherited by every worker).
  WorkerEnvBuilder(const LaunchConfig& config, std::string runId, EnvMap parentEnv);

  // The spec of local rank `localRank` (0 <= localRank < nprocPerNode) for `round`.
  // `errorFile` is the worker's TORCHELASTIC_ERROR_FILE. Does not block or throw.
  WorkerSpec build(int localRank, const RendezvousResult& round, const WorkerStoreAddress& store,
                   const std::string& errorFile) const;

  // True when OMP_NUM_THREADS is absent from the agent's env and nprocPerNode > 1, i.e. workers
  // get OMP_NUM_THREADS=1 (torchrun's rule).
  bool ompThreadsDefaulted() const;

 private:
  const LaunchConfig& config_;
  std::string runId_;
  EnvMap parentEnv_;
};

// Replaces every "${local_rank}" in `arg` with `localRank` (torchrun's macros.substitute).
std::string substituteLocalRank(const std::string& arg, int localRank);

}  // namespace ddp
