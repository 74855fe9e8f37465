// Environment detection for the command line: Slurm job steps fill in what the user left unset.
//
// Inside an srun step (SLURM_JOB_ID and SLURM_STEP_ID set; launcher/cli/slurm_env.hpp derives the
// values), for each option neither on the command line nor in PET_*:
//   --nnodes         = the step's node count (fixed, MIN = MAX)
//   --node-rank      = SLURM_NODEID when the node count is fixed (MIN = MAX); for an elastic job
//                      (--nnodes MIN:MAX with MIN < MAX) SLURM_NODEID only orders the nodes
//                      (LaunchConfig::nodeOrder) and the rendezvous assigns compact ranks
//   --rdzv-backend   = c10d
//   --rdzv-endpoint  = <first host of the node list>:<port rule of slurm_env.hpp>   (c10d only)
//   --rdzv-id        = <job id>.<step id>
//   port             = DDP_SLURM_PORT, else derived from the job and step ids (slurm_env.hpp)
//   is_host          = node rank 0 hosts the store (unless --rdzv-conf is_host=... or an explicit
//                      endpoint, e.g. a ddprund, is given)
// With an explicit --rdzv-backend=static, --master-addr/--master-port get the first host and port
// instead. The batch script itself (no step) is left alone: only one agent would run there.
// Kubernetes needs nothing here: Kubeflow's operators speak PET_*, read by the parser.
// Thread safety: reentrant; reads the environment only through `getenv`.
#pragma once

#include "launcher/config/launch_config.hpp"
#include "launcher/numa/nproc.hpp"

namespace ddp::detail {

// Applies the rules above and appends one line to config.notes. Throws UsageError for malformed
// SLURM_* values or several agents per node (SLURM_LOCALID > 0; use --ntasks-per-node=1).
void applySlurmDetection(LaunchConfig& config, const EnvLookup& getenv);

}  // namespace ddp::detail
