// Worker processes: fork + exec of one worker so that neither it nor anything it starts can
// outlive its agent.
//
// Each worker is started by its own guardian (guardian.hpp), a small process forked from the agent:
//   agent ─ guardian (own process group, dies with the agent's death signal after killing the
//           worker's tree) ─ worker (own process group, PR_SET_PDEATHSIG=SIGKILL to the guardian)
// The agent signals the worker's process group directly (signalWorker: killpg(pid)), watches and
// reaps the guardian (its only direct child), and learns the worker's exact wait status from the
// guardian's report pipe. At a terminal (WorkerSpec::terminal, terminal.hpp) the worker joins the
// agent's foreground process group instead, and its console streams are pseudo-terminals. stdout
// and stderr go to fresh pipes (or those pseudo-terminals) the agent reads; stdin and the agent's
// environment are inherited; every other descriptor is closed (as Python's
// Popen(close_fds=True) in torchrun).
//
// The guardian's parent-death signal follows the *thread* that forked: call spawnWorker from a
// thread that lives as long as the worker (ddprun: the main thread). Every signal is blocked in
// that thread for the duration of the fork, so no handler of the agent ever runs in the guardian.
//
// Thread safety: spawnWorker may be called from any one thread at a time; the other functions
// from the thread that owns the SpawnedProcess.
#pragma once

#include <sys/types.h>

#include <string>
#include <vector>

#include "launcher/workers/worker_env_builder.hpp"
#include "rendezvous/base/error.hpp"

namespace ddp {

// The worker's program could not be started (not found, not executable). Restarting will not help.
class SpawnError : public ConfigError {
 public:
  using ConfigError::ConfigError;
};

struct SpawnedProcess {
  pid_t pid = -1;          // the worker; also its process-group id unless it joined the terminal's
  pid_t guardianPid = -1;  // the agent's child: watch and reap this one
  int stdoutFd = -1;       // read ends (close-on-exec); set them to -1 when taking them over
  int stderrFd = -1;
  int reportFd = -1;  // the guardian's report pipe (read end)
  int pidFd = -1;     // pidfd of the worker (-1 when it was gone already)
};

// Looks `program` up on `path` (a PATH value) unless it contains '/'. Returns "" when not found.
std::string resolveProgram(const std::string& program, const std::string& path);

// Starts argv with exactly `env` under a fresh guardian. Blocks only until the exec succeeded or
// failed (microseconds to milliseconds). Throws SpawnError naming the program and the errno text
// when exec fails (the guardian is reaped), Error when fork or pipe fail.
SpawnedProcess spawnWorker(const std::vector<std::string>& argv, const EnvMap& env);

// Starts every spec's argv with its env, in spec order: all guardians are forked first, then their
// reports are read, so the workers start side by side. A spec's binding (--numa-binding) is applied
// by its guardian before the worker starts (SpawnError naming the errno when the kernel refuses
// it). Blocks until every exec succeeded or failed. On any failure nothing is left running
// (started workers are killed, every guardian reaped) and the first error is thrown, as
// spawnWorker throws it.
std::vector<SpawnedProcess> spawnWorkers(const std::vector<WorkerSpec>& specs);

// The worker's raw wait status, once its guardian was reaped with `guardianStatus`. `reported` is
// false when the guardian died without reporting (it was killed): then the worker got SIGKILL from
// its parent-death signal, the guardian's status is returned, and whatever the worker left behind
// has become a child of the agent (see ChildReaper::sweepStrays). The shared-memory segments the
// worker created and could not remove (train's allreduce segment, /dev/shm/ddprun-allreduce-<pid>-*:
// trainer/shm_allreduce.hpp) are removed: a worker killed while setting one up leaves it linked,
// holding its memory until the next boot. Non-blocking.
int workerExitStatus(const SpawnedProcess& process, int guardianStatus, bool& reported);

// True once the worker process itself has exited (zombie or reaped), whatever its guardian is
// doing. Exact through the worker's pidfd. Non-blocking.
bool hasExited(const SpawnedProcess& process);

// Closes whichever of its descriptors are still open (>= 0) and sets them to -1. Idempotent.
void closeHandles(SpawnedProcess& process);

}  // namespace ddp
