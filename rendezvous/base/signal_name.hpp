// signalName: the one way ddprun prints a signal number ("SIGKILL"), in logs, failure summaries,
// the status page and --dry-run.
//
// Thread safety: a pure function.
#pragma once

#include <string>

namespace ddp {

// "SIGKILL" for 9, "signal 77" for a number without a name (sigabbrev_np). Never throws.
std::string signalName(int signo);

}  // namespace ddp
