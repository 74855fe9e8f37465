// The rendezvous half of the command line, resolved once after flags, PET_* and Slurm detection:
// standalone, the endpoint(s), the run id and the rendezvous settings.
//
//   standalone     --standalone, or torchrun 2.x's implicit form (static, one node, no
//                  --rdzv-endpoint, no --master-port): c10d on localhost:0, a random uuid run id
//   endpoints      static: --rdzv-endpoint HOST:PORT (the port is required, as torchrun's static
//                  handler), else --master-addr:--master-port (29500); c10d: HOST[:29400], required
//                  when more than one node may join (else localhost:29400); etcd/etcd-v2: a list,
//                  localhost:2379 when none is given
//   run id         --rdzv-id / PET_RDZV_ID / Slurm's "<job>.<step>"; a multi-node c10d or etcd job
//                  without one takes TORCHELASTIC_RUN_ID, then SLURM_JOB_ID (unless --no-slurm),
//                  else torchrun's "none" (an empty --rdzv-id= or PET_RDZV_ID= counts as none given)
//   settings       --rdzv-conf over the backend's defaults (rdzv_conf.hpp); config.rdzv gets the
//                  run id, node range, restart budget and job fingerprint too
//
// Thread safety: reentrant; reads the environment only through `getenv`.
#pragma once

#include <map>
#include <string>

#include "launcher/config/launch_config.hpp"
#include "launcher/numa/nproc.hpp"

namespace ddp::detail {

// Turns the configuration into a standalone one when asked (see above). Throws UsageError when
// --standalone meets more than one node; `origin` ("--standalone" or "PET_STANDALONE", where the
// switch came from) names it.
void applyStandalone(LaunchConfig& config, const std::string& origin);

// What tells this job from another one that meets it under the same run id on one store
// (RendezvousSettings::jobFingerprint): the entry point — a script's or program's file name, "-m
// <module>" — and the node range, "train.py, nnodes 1:4". Left out, because they may differ
// between the nodes of one job: the entry point's directory and arguments (per-node paths),
// --nproc-per-node, --role, --node-rank, --local-addr and the interpreter.
std::string jobFingerprint(const LaunchConfig& config);

// Resolves endpoints, run id and settings as above. `rdzvConf` is the parsed --rdzv-conf map,
// already checked by applyRdzvConf when it was read (so that errors name its flag or variable).
// Throws UsageError naming the flag and value at fault.
void finalizeRendezvous(LaunchConfig& config, const std::map<std::string, std::string>& rdzvConf,
                        const EnvLookup& getenv);

}  // namespace ddp::detail
