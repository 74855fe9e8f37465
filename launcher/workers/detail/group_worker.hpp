// The record WorkerGroup keeps of each of its workers (worker_group.hpp), shared by the files that
// implement WorkerGroup: worker_group.cpp (start, exits, stop, failures) and worker_group_hang.cpp
// (the steps hang detection asks for: marking a worker hung, its stderr capture, its end).
//
// Thread safety: the group's (its io_context's thread only).
#pragma once

#include <sys/types.h>

#include <cstdint>
#include <memory>
#include <optional>
#include <string>

#include "launcher/failures/failure_summary.hpp"
#include "launcher/workers/hang_verdict.hpp"
#include "launcher/workers/output_pump.hpp"
#include "launcher/workers/worker_env_builder.hpp"
#include "launcher/workers/worker_group.hpp"
#include "launcher/workers/worker_process.hpp"

namespace ddp {

struct WorkerGroup::Worker {
  WorkerSpec spec;
  pid_t pid = -1;  // the worker (its guardian is proc.guardianPid)
  SpawnedProcess proc;
  std::unique_ptr<OutputPump> out;
  std::unique_ptr<OutputPump> err;
  bool exited = false;
  int status = 0;
  // The exit record (see failure_summary.hpp for how these order failures).
  int64_t reapSeq = 0;
  int64_t failureSeq = 0;
  bool seqByWorker = false;
  bool signalledBeforeExit = false;  // a stop signal reached it while it still ran
  std::optional<ErrorFileContents> errorFile;
  int64_t monotonicMs = 0;  // display only
  int64_t unixMs = 0;       // display only
  // Hang detection (markHung): the verdict; until endHung(), `hangHeld` keeps stop signals other
  // than SIGKILL away (its stacks are being taken, or those of another hung worker).
  std::optional<HangVerdict> hang;
  bool hangHeld = false;
  RecordedStacks stacks;
};

}  // namespace ddp
