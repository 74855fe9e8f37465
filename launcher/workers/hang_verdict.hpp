// HangVerdict: a worker that hang detection (launcher/hang/) found hung, and how the worker group
// is to end it (WorkerGroup::takeHung): which process's stacks to take, and with which signal.
//
// Thread safety: a plain value.
#pragma once

#include <sys/types.h>

#include <string>

namespace ddp {

struct HangVerdict {
  int localRank = 0;
  pid_t target = 0;  // the process to take stacks from: the worker, or the timer's process
  int signal = 0;    // 0: end the worker's process group with SIGKILL; else the timer's signal
  std::string reason;  // "no progress for 3.0 s (last reported step 41)", "file timer ... expired"
};

}  // namespace ddp
