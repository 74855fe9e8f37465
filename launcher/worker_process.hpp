// Worker processes: fork + exec of one worker so that it can never outlive its agent.
//
// Each worker runs in its own process group (so the agent signals the worker and everything it
// started with one killpg), with PR_SET_PDEATHSIG = SIGKILL set in the child followed by a check
// that the agent is still its parent (closing the race where the agent dies between fork and
// prctl). Even a SIGKILL of ddprun therefore takes every worker with it. stdout and stderr go to
// fresh pipes the agent reads; stdin and the rest of the agent's environment are inherited; every
// other descriptor is closed (as Python's Popen(close_fds=True) in torchrun).
//
// The parent-death signal follows the *thread* that forked: call spawnWorker from a thread that
// lives as long as the worker (ddprun: the main thread).
//
// Thread safety: spawnWorker may be called from any one thread at a time.
#pragma once

#include <sys/types.h>

#include <string>
#include <vector>

#include "launcher/worker_env_builder.hpp"
#include "rendezvous/error.hpp"

namespace ddp {

// The worker's program could not be started (not found, not executable). Restarting will not help.
class SpawnError : public ConfigError {
 public:
  using ConfigError::ConfigError;
};

struct SpawnedProcess {
  pid_t pid = -1;     // also its process-group id
  int stdoutFd = -1;  // read ends (close-on-exec), owned by the caller
  int stderrFd = -1;
};

// Looks `program` up on `path` (a PATH value) unless it contains '/'. Returns "" when not found.
std::string resolveProgram(const std::string& program, const std::string& path);

// Starts argv with exactly `env`. Blocks only until the exec succeeded or failed (microseconds to
// milliseconds). Throws SpawnError naming the program and the errno text when exec fails (the
// child is reaped), Error when fork or pipe fail.
SpawnedProcess spawnWorker(const std::vector<std::string>& argv, const EnvMap& env);

}  // namespace ddp
