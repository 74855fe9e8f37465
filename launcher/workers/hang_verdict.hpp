// The values hang detection (launcher/hang/) and the worker group share: HangVerdict, a worker
// found hung and how it is to be ended (WorkerGroup::markHung, endHung): which process (its stacks
// are taken from it too) and with which signal; and RecordedStacks, what its stacks showed, which
// its failure carries (WorkerGroup::setHungStacks, failure_summary.hpp).
//
// Thread safety: plain values.
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

// What a hung worker's failure shows of its stacks (launcher/hang/stack_collector.hpp:
// recordStacks).
struct RecordedStacks {
  std::string shown;  // the first lines (hang/stack_text.hpp: trimStacks), for the log and summary
  std::string file;   // where the whole text is ("" when it could not be written)
  bool waitsForPeer = false;
};

}  // namespace ddp
