// HangSettings: what hang detection does on this node
// (docs/running.md#hang-detection---hang-timeout-torchs-file-timers), and what it adds to each
// worker's environment.
//
// Thread safety: a plain value and a pure function.
#pragma once

#include <chrono>
#include <map>
#include <memory>
#include <string>

#include "launcher/straggler/straggler_watch.hpp"

namespace ddp {

struct HangSettings {
  // --hang-timeout: a worker without progress this long hangs (0 = progress is not judged).
  std::chrono::milliseconds timeout{0};
  // TORCHELASTIC_ENABLE_FILE_TIMER=1: serve torch's file timers (TORCHELASTIC_TIMER_FILE, or a
  // fresh path when that is unset).
  bool fileTimer = false;
  std::string timerFile;
  // How long taking one worker's stacks may take (gdb, or a Python dump) before it is ended anyway.
  std::chrono::milliseconds stackBound{std::chrono::seconds(20)};

  // --straggler-threshold (non-null when on): the progress beats' compute times go to it
  // (launcher/straggler/straggler_watch.hpp), shared with the agent's status publisher.
  std::shared_ptr<StragglerWatch> stragglers;

  // True when the agent serves the timer FIFO at all.
  bool enabled() const { return timeout.count() > 0 || fileTimer || stragglers != nullptr; }
  // True when workers get DDP_PROGRESS_FILE (worker_runtime's progress beats).
  bool wantsBeats() const { return timeout.count() > 0 || stragglers != nullptr; }
};

// Adds to a worker's `env`, when hang detection is enabled: DDP_PROGRESS_FILE=<fifo> (with
// --hang-timeout or --straggler-threshold: worker_runtime's progress beats), TORCHELASTIC_TIMER_FILE=<fifo> (with the file
// timer, as torchrun exports it) and PYTHONFAULTHANDLER=1 (unless the agent's environment sets it:
// a Python worker then prints every thread's traceback on SIGABRT). Pure.
void addHangEnvironment(std::map<std::string, std::string>& env, const HangSettings& settings, const std::string& fifoPath);

}  // namespace ddp
