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
//   port       DDP_SLURM_PORT if set (1-65535), else 29500 + (job id + step id) % 100, i.e. inside
//              29500-29599, the range the operators open; the step id keeps two concurrent steps
//              of one job apart (a non-numeric step id such as "batch" counts as 0).
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
  // Every host of the step (or job), in Slurm's order.
  std::vector<std::string> hosts;
};

// Returns the value of an environment variable, or nullopt when unset.
using EnvLookup = std::function<std::optional<std::string>(const std::string& name)>;

// The lowest rendezvous port of the rule and the number of ports it uses.
inline constexpr uint16_t kSlurmPortBase = 29500;
inline constexpr int kSlurmPortSpan = 100;

// Derives the context from `env`. Returns {inSlurm = false} when SLURM_JOB_ID is unset or empty.
// Does not block. Throws ConfigError naming the variable and its value when a present variable is
// malformed (non-numeric counts, SLURM_NODEID outside [0, nnodes), a bad nodelist, a node count
// that disagrees with the node list, DDP_SLURM_PORT outside 1-65535) or no node list is set.
SlurmContext slurmContextFrom(const EnvLookup& env);

// The same over a map (tests).
SlurmContext slurmContextFrom(const std::map<std::string, std::string>& env);

// The same over the process environment (getenv).
SlurmContext slurmContextFromEnvironment();

// One line for the user: "Slurm step 42.0: node 1 of 4 (first host n1), rendezvous n1:29542".
std::string describe(const SlurmContext& context);

}  // namespace ddp
