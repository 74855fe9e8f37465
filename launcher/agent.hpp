// The ddprun agent: one per node. Joins the rendezvous, hosts the generation's worker store on
// node rank 0, starts this node's workers with torchrun's env contract, supervises them, restarts
// the whole job while the job-wide budget allows, and prints the job-wide failure summary.
//
// Exit codes (documented in the README):
//   0          every worker of the job exited 0
//   N          the job failed: N is the root-cause worker's exit code (128 + signal when a signal
//              killed it)
//   128 + S    ddprun got signal S (SIGTERM, SIGINT, ... or --signals-to-handle); forwarded to the
//              workers, which were stopped
//   1          the rendezvous failed (timeout, store lost, job ended elsewhere without a record)
//   127        a worker's program could not be started
//
// Thread safety: run() is called once, from the main thread (workers die with that thread).
#pragma once

#include "launcher/launch_config.hpp"

namespace ddp {

// Runs the job described by `config` to its end and returns ddprun's exit code. Throws
// ConfigError for bad settings found late (unsupported backend, bad --rdzv-conf), SpawnError when
// a worker program cannot be started, and the rendezvous' errors (TimeoutError, NetworkError,
// JobEndedError).
int run(const LaunchConfig& config);

}  // namespace ddp
