// The ddprun agent: one per node. Joins the rendezvous, hosts the generation's worker store on
// node rank 0, starts this node's workers with torchrun's env contract, supervises them, restarts
// the whole job while the job-wide budget allows, and prints the job-wide failure summary.
//
// Exit codes (documented in docs/running.md#exit-codes):
//   0          the job succeeded: every worker of its last generation exited 0 (also on a node
//              that was dropped from the job earlier and ran workers before; a warning says so)
//   N          the job failed: N is the root-cause worker's exit code (128 + signal when a signal
//              killed it), on every node, dropped ones included
//   128 + S    ddprun got signal S (SIGTERM, SIGINT, ... or --signals-to-handle); forwarded to the
//              workers, which were stopped
//   1          the rendezvous failed (kRendezvousFailedExitCode): this node's join timed out (it
//              withdrew), the store could not be reached or belongs to another run, or the job
//              ended before this node ran any worker — a launch that started no worker never
//              exits 0
//   85         the job failed without a worker failure to blame: the rendezvous ended it (another
//              client aborted it, an agent's verdict); the summary's root cause says why
//   86         the rendezvous store was lost while this node was a member of a round
//   127        a worker's program could not be started
//   4          --preflight=strict failed the round before any worker started
//              (kPreflightFailedExitCode, preflight.hpp): every node of the round exits 4
//
// The loop: next() → the round's preflight checks (preflight.hpp) → run the generation's workers → restart_policy.hpp's decide() (performing the
// rendezvous calls it names) → rejoin or exit.
//
// Thread safety: run() is called once, from the main thread (workers die with that thread).
#pragma once

#include "launcher/config/launch_config.hpp"

namespace ddp {

// Runs the job described by `config` to its end and returns ddprun's exit code. Throws
// ConfigError for bad settings found late (unsupported backend, bad --rdzv-conf, conflicting node
// ranks), SpawnError when a worker program cannot be started, and the rendezvous' failures
// (TimeoutError, NetworkError, Error: main maps them to 1).
int run(const LaunchConfig& config);

}  // namespace ddp
