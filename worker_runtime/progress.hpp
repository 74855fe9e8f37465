// reportProgress: tells this worker's ddprun agent that training moves on, for its hang detection
// (ddprun --hang-timeout; docs/running.md#hang-detection---hang-timeout-torchs-file-timers)
// and, with the step's compute time, for its straggler detection (ddprun --straggler-threshold;
// docs/running.md "Straggler detection"). Call it once per step; the `train` binary does.
//
// The agent exports DDP_PROGRESS_FILE (its timer FIFO) to workers when --hang-timeout or
// --straggler-threshold is given; without it, or outside ddprun, reportProgress does nothing. A
// beat is one line of torch's file-timer protocol (launcher/hang/file_timer_request.hpp: the
// release of the scope "ddprun.progress", with the step and, when compute times were given,
// "compute_s": the mean compute seconds per step of the steps reported since the previous beat),
// written like torch's FileTimerClient writes: open non-blocking, one atomic write, close — so
// torchrun's own watchdog ignores it. Beats are sent at most every 100 ms (a worker that steps
// faster reports the latest step then); a beat the agent cannot take (no reader, a full pipe) is
// dropped, never waited for. SIGPIPE is kept from the process. Between beats a call costs a mutex
// and a clock read (docs/benchmarks.md#progress-beats-at-1-ms-steps--scriptsbenchbeatssh).
//
// The step is also kept, under ddprun or not: worker_main writes the last one into the error file
// when the worker fails (extraInfo.step, error_file.hpp), so that ddprun's verdict
// (docs/running.md "A verdict instead of a loop") knows the step a failure happened at.
//
// Thread safety: thread-safe. Never blocks (one open/write/close at most); never throws.
#pragma once

#include <cstdint>
#include <optional>

namespace ddp {

void reportProgress(int64_t step);

// The same, for a step that spent `computeSeconds` (>= 0, finite; else only the step counts) of
// its own work: the time it did not spend waiting for its peers (in data-parallel training, from
// the step's start until it waits for the gradients' allreduce, plus the optimizer — not the wall
// time of the step, which a synchronous allreduce makes equal on every rank). Thread-safe; never
// blocks, never throws.
void reportProgress(int64_t step, double computeSeconds);

// The step of the last reportProgress() call of this process; nullopt before the first. Never
// blocks, never throws.
std::optional<int64_t> lastReportedStep();

}  // namespace ddp
