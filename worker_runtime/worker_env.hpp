// WorkerEnv: the torchrun environment contract as seen by a worker
// (docs/running.md#worker-environment-exactly-torchruns).
//
// Thread safety: a plain value.
#pragma once

#include <cstdint>
#include <string>

#include "rendezvous/base/endpoint.hpp"
#include "rendezvous/base/rank_layout.hpp"

namespace ddp {

// RANK, WORLD_SIZE, LOCAL_RANK, LOCAL_WORLD_SIZE, GROUP_RANK (node rank), GROUP_WORLD_SIZE
// (nodes): the RankLayout it embeds.
struct WorkerEnv : RankLayout {
  Endpoint master;           // MASTER_ADDR, MASTER_PORT (1..65535)
  int restartCount = 0;      // TORCHELASTIC_RESTART_COUNT (the job-wide generation)
  int maxRestarts = 0;       // TORCHELASTIC_MAX_RESTARTS
  std::string runId;         // TORCHELASTIC_RUN_ID
  std::string errorFile;     // TORCHELASTIC_ERROR_FILE ("" = none)
  bool useAgentStore = false;  // TORCHELASTIC_USE_AGENT_STORE == "True"
  // DDP_QUORUM_BOARD / DDP_QUORUM_SLOT: the agent's quorum board and this worker's slot, exported
  // by ddprun --restart-scope=failed (elastic_group.hpp); "" / -1 otherwise.
  std::string quorumBoard;
  int quorumSlot = -1;
  // DDP_STATE_FROM_PEER=1: this process joins a running job (a replacement, or a node added in
  // place): its training state must come from a peer.
  bool stateFromPeer = false;

  // Reads and validates the variables above from the process environment. Required: RANK,
  // WORLD_SIZE, MASTER_ADDR, MASTER_PORT. Defaults: LOCAL_WORLD_SIZE = WORLD_SIZE, LOCAL_RANK =
  // RANK % LOCAL_WORLD_SIZE, GROUP_RANK = 0, GROUP_WORLD_SIZE = 1, counters 0, strings empty,
  // TORCHELASTIC_USE_AGENT_STORE = False, no quorum board (DDP_QUORUM_SLOT defaults to
  // LOCAL_RANK when DDP_QUORUM_BOARD is set). Checks RANK < WORLD_SIZE, LOCAL_RANK < LOCAL_WORLD_SIZE
  // <= WORLD_SIZE, GROUP_RANK < GROUP_WORLD_SIZE, 1 <= MASTER_PORT <= 65535. Does not block.
  // Throws ConfigError naming the missing or malformed variable and its value.
  static WorkerEnv fromEnvironment();
};

}  // namespace ddp
