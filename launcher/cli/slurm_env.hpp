// SlurmContext: what ddprun derives from the SLURM_* environment of a job step, so that
// `srun -N4 --ntasks-per-node=1 ddprun ...` needs no --nnodes/--node-rank/--rdzv-endpoint/--rdzv-id.
//
// Sources, first present wins:
//   inSlurm    SLURM_JOB_ID (or SLURM_JOBID) non-empty
//   inStep     SLURM_STEP_ID (or SLURM_STEPID) non-empty: an srun step, not the batch script
//   hosts      SLURM_STEP_NODELIST (in a step), SLURM_JOB_NODELIST, SLURM_NODELIST; parsed natively
//   nnodes     SLURM_STEP_NUM_NODES (in a step), SLURM_JOB_NUM_NODES, SLURM_NNODES, hosts.size()
//   nodeRank   SLURM_NODEID (the node's index in the step's node list), else 0
//   localTask  SLURM_LOCALID (the task's index on its node; > 0 means several agents per node)
//   runId      "<job id>.<step id>" in a step, "<job id>" outside one
//   firstHost  hosts[0]: the node that hosts the rendezvous
//   port       DDP_SLURM_PORT if set (1-65535), else 29600 + (job id + 389 x step id) % 1000, i.e.
//              inside 29600-30599: clear of 29400 (c10d, ddprund) and 29500 (static), and below
//              Linux's ephemeral range. The same step of two jobs shares a port only when their ids
//              differ by a multiple of 1000 (the old rule, 29500 + (job + step) % 100, put jobs 59
//              and 159 together); the steps of one job are 389 ports apart; a non-numeric step id
//              ("batch") counts as 0. When two jobs do meet on one first node, the second's node 0
//              cannot bind and says so, naming the port and DDP_SLURM_PORT.
//
// Thread safety: pure functions over an env lookup; slurmContextFromEnvironment() reads the process
// environment (do not call it while another thread calls setenv).
#pragma once

#include <cstdint>
#include <functional>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "rendezvous/base/env_lookup.hpp"

namespace ddp {

struct SlurmContext {
  // SLURM_JOB_ID is set: every other field is meaningful only then.
  bool inSlurm = false;
  // Inside an srun step (SLURM_STEP_ID set); false in the batch script itself.
  bool inStep = false;
  // Nodes of the step (or job), >= 1 when inSlurm.
  int nnodes = 0;
  // This node's index, 0 <= nodeRank < nnodes.
  int nodeRank = 0;
  // This task's index on its node (SLURM_LOCALID); ddprun wants one task per node.
  int localTask = 0;
  // First host of the node list: where the rendezvous store runs.
  std::string firstHost;
  // Job id + "." + step id; the rendezvous run id.
  std::string runId;
  // The rendezvous port (see the rule above).
  uint16_t port = 0;
  // The port came from DDP_SLURM_PORT, not the rule.
  bool portOverridden = false;
  // Every host of the step (or job), in Slurm's order.
  std::vector<std::string> hosts;
};

// The lowest rendezvous port of the rule, the number of ports it uses, and the step id's factor
// (coprime with the span, so the steps of one job land far apart).
inline constexpr uint16_t kSlurmPortBase = 29600;
inline constexpr int kSlurmPortSpan = 1000;
inline constexpr int kSlurmPortStepFactor = 389;

// Derives the context from `env`. Returns {inSlurm = false} when SLURM_JOB_ID is unset or empty.
// Does not block. Throws ConfigError naming the variable and its value when a present variable is
// malformed (non-numeric counts, SLURM_NODEID outside [0, nnodes), a bad nodelist, a node count
// that disagrees with the node list, DDP_SLURM_PORT outside 1-65535) or no node list is set.
SlurmContext slurmContextFrom(const EnvLookup& env);

// The same over a map (tests).
SlurmContext slurmContextFrom(const std::map<std::string, std::string>& env);

// The same over the process environment (getenv).
SlurmContext slurmContextFromEnvironment();

// One line for the user: "Slurm step 42.0: node 1 of 4 (first host n1), rendezvous n1:29642".
std::string describe(const SlurmContext& context);

}  // namespace ddp
