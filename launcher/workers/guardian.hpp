// The worker guardian: one small process per worker, between the agent and the worker, so that
// nothing a worker started can outlive the worker or ddprun.
//
//   ddprun (agent)        child subreaper; forks one guardian per worker
//    └─ guardian          own process group; PR_SET_PDEATHSIG (the agent's death wakes it) and
//        │                child subreaper (every orphan below the worker becomes its child)
//        └─ worker        own process group (pgid = its pid; at a terminal ddprun's, see
//            │            terminal.hpp); PR_SET_PDEATHSIG=SIGKILL
//            └─ ...       anything: background jobs, double forks, setsid()
//
// The guardian is a fork of the agent that never execs: it runs runGuardian(), which only makes
// async-signal-safe system calls (no allocation, no locks), so it is safe to keep after forking the
// multi-threaded agent. It applies the worker's NUMA binding to itself when there is one
// (cpu_binding.hpp: the worker inherits it), starts the worker with vfork + exec, reports the
// worker's pid (or the exec errno) on the report pipe, then sleeps in sigwaitinfo() with every
// signal blocked:
//   * the worker exited: SIGKILL to the worker's process group (when it leads one) and to every
//     process left below
//     the guardian (found through /proc, process_tree.hpp), all reaped; then the worker's raw wait
//     status goes to the agent on the report pipe and the guardian exits the same way (same exit
//     code, or death by the same signal);
//   * the agent died (its parent changed; PR_SET_PDEATHSIG makes sure it wakes): the same
//     killing, then it exits. Nothing of the job is left within milliseconds, even after kill -9
//     of ddprun;
//   * either way, the file the plan names (a standby's FIFO, standby_pool.hpp) is unlinked as the
//     guardian exits, and once the agent is gone its folder too when that leaves it empty: the
//     last guardian of an agent killed with SIGKILL removes the folder;
//   * any other signal (e.g. Slurm signalling every process of a step) is ignored: the agent alone
//     forwards signals to the workers.
//
// Thread safety: runGuardian runs in a freshly forked child only.
#pragma once

#include <sys/types.h>

#include <cstdint>

namespace ddp {

struct CpuBinding;

// What the guardian writes on the report pipe (each record one atomic write).
struct GuardianReport {
  enum Kind : int32_t { kStarted = 1, kExited = 2, kBindFailed = 3 };
  int32_t kind = 0;
  int32_t pid = 0;    // the worker's pid (0 for kBindFailed: no worker was started)
  // kStarted: the exec errno (0 = the worker runs); kExited: raw wait status; kBindFailed: the
  // errno of the binding's system call.
  int32_t value = 0;
};

// Everything the guardian needs, built before fork (the child may not allocate).
struct GuardianPlan {
  pid_t agent = -1;  // the agent's pid, to tell that it died
  const char* program = nullptr;
  char* const* argv = nullptr;
  char* const* envp = nullptr;
  int stdoutFd = -1;  // write ends the worker gets as fd 1 and 2
  int stderrFd = -1;
  int reportFd = -1;  // write end of the report pipe
  const CpuBinding* binding = nullptr;  // --numa-binding for this worker (nullptr: none)
  // > 0: the worker joins this process group (ddprun's, a terminal's foreground: terminal.hpp)
  // instead of leading one of its own.
  pid_t joinGroup = 0;
  // A file of the agent's that goes with this worker (nullptr: none): unlinked when the guardian
  // exits; `ownedDir` (its folder) is removed too, if empty, when the agent died.
  const char* ownedFile = nullptr;
  const char* ownedDir = nullptr;
  // The worker is put under SCHED_IDLE once it runs its program (best effort: at the agent's
  // policy when refused).
  bool idlePriority = false;
};

// Signal the guardian gets when the agent dies (blocked and read with sigwaitinfo).
constexpr int kGuardianDeathSignal = 15;  // SIGTERM

// The guardian's whole life. Call in the child right after fork, with every signal blocked.
[[noreturn]] void runGuardian(const GuardianPlan& plan) noexcept;

}  // namespace ddp
