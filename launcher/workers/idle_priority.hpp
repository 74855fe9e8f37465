// Idle CPU priority for standby processes (standby_pool.hpp): a standby prepares (imports torch,
// builds its model: seconds of CPU) under SCHED_IDLE, so that it takes only CPU time the workers
// leave unused, and is moved back to the agent's own policy (SCHED_OTHER, or SCHED_BATCH when
// ddprun runs under it; the nice value it inherited is kept) when it takes a worker's place.
//
// An unprivileged process may move a thread into SCHED_IDLE but not back out of it: the kernel
// wants CAP_SYS_NICE, or an RLIMIT_NICE of at least 20 - nice (sched(7)). So a standby starts at
// idle priority only when idleReturnPolicy() says that this agent can move it back; else it
// prepares at the agent's priority, as before.
//
// Thread safety: both functions may be called from any thread.
#pragma once

#include <sys/types.h>

namespace ddp {

// The policy a standby returns to: this process's own (SCHED_OTHER or SCHED_BATCH) when a thread
// of it can leave SCHED_IDLE for that policy again (tried once, on a short-lived thread of its own,
// and remembered); -1 when it cannot, or when this process runs under another policy (SCHED_IDLE
// already, a real-time one). Blocks for the thread's life (microseconds).
int idleReturnPolicy();
// The same, tried now (not remembered): what idleReturnPolicy() caches.
int probeIdleReturnPolicy();

// Moves every thread of `pid` and of every process below it that is in SCHED_IDLE to `policy`
// (idleReturnPolicy()'s), passing over the tree until a pass finds none (a thread started meanwhile
// inherits its creator's policy). Pass a standby's guardian: orphans of the standby are its
// children. Returns the number of threads moved. A process or thread that exits meanwhile is
// skipped; nothing throws. Reads /proc (proc_info.hpp's processTree); microseconds per thread.
int leaveIdlePriority(pid_t pid, int policy);

}  // namespace ddp
