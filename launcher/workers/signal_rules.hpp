// What a signal received by the agent means for the running workers.
//
// Stop signals: SIGTERM, SIGINT, SIGHUP, SIGQUIT ask the job to stop (forwarded, then the shutdown
// grace, then SIGKILL; ddprun exits 128 + signal). Every other handled signal (SIGUSR1, SIGUSR2,
// a scheduler's pre-emption warning) is a notice: forwarded, nothing else; the workers' own exits
// decide the outcome (all 0 = success).
//
// Counting copies. One event often reaches ddprun more than once: a wrapper in ddprun's process
// group (timeout(1), a launcher script) forwards what it got to its whole group, so ddprun gets the
// sender's copy and the wrapper's. A copy is a *relay* when its sender is another process of
// ddprun's own process group (siginfo's si_pid, looked up when the signal arrives). The rules:
//   * each stop signal is forwarded to the workers once per generation; repeats are dropped;
//   * a relayed copy of a notice that was already forwarded is dropped;
//   * a second SIGINT that is not a relay (a second Ctrl-C on the terminal, whose copies come from
//     the kernel, or a kill from another process group) kills the workers at once.
// No timestamps are compared: a duplicate is told by who sent it, not by when.
//
// Thread safety: plain values; SignalTally is used from one thread.
#pragma once

#include <sys/types.h>

#include <set>

namespace ddp {

struct ReceivedSignal {
  int signo = 0;
  int code = 0;        // siginfo si_code: SI_USER from kill(), SI_KERNEL from a terminal, ...
  pid_t sender = 0;    // siginfo si_pid (0 when the kernel sent it)
  bool relay = false;  // sent by another process of ddprun's own process group
};

// True for SIGTERM, SIGINT, SIGHUP and SIGQUIT.
bool asksToStop(int signo);

enum class SignalAction {
  kStop,     // the first stop request: forward it and stop the group (grace, then SIGKILL)
  kForward,  // forward it, nothing else (a notice, or another stop signal while stopping)
  kKillNow,  // a second interrupt from outside ddprun's process group: SIGKILL the workers now
  kDrop,     // a repeat the workers already got
};

// Decides, copy by copy, what the handled signals mean for one generation's workers.
class SignalTally {
 public:
  // `stopping`: the group is already being stopped (a failure, an earlier signal).
  SignalAction onSignal(const ReceivedSignal& s, bool stopping);

 private:
  std::set<int> forwarded_;
  int interrupts_ = 0;  // SIGINT copies that were not relays
};

}  // namespace ddp
