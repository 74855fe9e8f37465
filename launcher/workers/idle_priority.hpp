// Idle CPU priority for standby processes (standby_pool.hpp): a standby prepares (imports torch,
// builds its model: seconds of CPU) under SCHED_IDLE, so that it takes only CPU time the workers
// leave unused, and is raised back to SCHED_OTHER (at the nice value it inherited) when it takes a
// worker's place.
//
// An unprivileged process may move a thread into SCHED_IDLE but not back out of it: the kernel
// wants CAP_SYS_NICE, or an RLIMIT_NICE of at least 20 - nice (sched(7)). So a standby starts at
// idle priority only when idlePriorityReversible() says that this agent can raise it again; else it
// prepares at normal priority, as before.
//
// Thread safety: both functions may be called from any thread.
#pragma once

#include <sys/types.h>

namespace ddp {

// True when a thread of this process can leave SCHED_IDLE for SCHED_OTHER again (tried once, on a
// short-lived thread of its own, and remembered). Blocks for the thread's life (microseconds).
bool idlePriorityReversible();

// Moves every thread of `pid` and of every process below it that is in SCHED_IDLE back to
// SCHED_OTHER, passing over the tree until a pass finds none (a thread started meanwhile inherits
// its creator's policy). Returns the number of threads moved. A process or thread that exits
// meanwhile is skipped; nothing throws. Reads /proc; blocks for microseconds per thread.
int leaveIdlePriority(pid_t pid);

}  // namespace ddp
