// Failure sequence: a worker's place in the job-wide order of failures.
//
// When a worker fails, the first thing it does is take the next number of its generation's
// failure counter in the worker store (an ADD on failureSequenceKey(TORCHELASTIC_RESTART_COUNT)
// at MASTER_ADDR:MASTER_PORT; rendezvous/store/worker_store_keys.hpp). It does so before it closes its
// communicator: closing the connections is what makes its peers fail, so a peer's collateral
// error (Gloo "Connection reset by peer", a CommError) always gets a later number than the fault
// that caused it. runWorkerMain writes the number into the error file (extraInfo.failure_seq) and
// ddprun's failure summary orders failures by it — a happens-before order, never a clock.
//
// Claimed at most once per process: the first claim connects, adds and remembers the number;
// later calls return it. The communicators claim when they are destroyed while an exception
// unwinds (gloo_communicator.cpp, nccl_communicator.cpp); runWorkerMain claims for every
// exception that escapes the worker.
//
// A claim in a process started with the worker env contract (MASTER_ADDR and MASTER_PORT set)
// also makes the failure durable and lets the worker finish reporting it:
//   - it writes $TORCHELASTIC_ERROR_FILE at once with the number and a placeholder message, which
//     runWorkerMain replaces with the real one (so a worker that dies in its teardown is still
//     ordered by the number it took);
//   - the process ignores SIGTERM, SIGINT, SIGHUP and SIGQUIT from then on: it is failing and
//     exits by itself once its report is written, and the stop signal ddprun sends to the rest of
//     the group after the first exit would only cut that report short. A worker that hangs in its
//     teardown is still ended by ddprun's SIGKILL after --shutdown-timeout.
//
// Thread safety: both functions may be called from any thread; concurrent claims take one number.
#pragma once

#include <chrono>
#include <cstdint>
#include <optional>

namespace ddp {

// Takes (once) and returns this process's failure number. nullopt when the process has no worker
// store (MASTER_ADDR / MASTER_PORT unset or malformed) or the store did not answer within
// `budget`; a failed claim is not retried. Blocks up to `budget`. Never throws.
std::optional<int64_t> claimFailureSequence(
    std::chrono::milliseconds budget = std::chrono::milliseconds(2000));

// The number an earlier claim took, if any. Non-blocking.
std::optional<int64_t> claimedFailureSequence();

}  // namespace ddp
