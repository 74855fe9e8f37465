// The terminal ddprun runs in, and what its workers get of it — torchrun's behaviour at a
// terminal (docs/running.md#at-a-terminal).
//
// Under torchrun the workers are in the launcher's process group: at a terminal they are in its
// foreground, so a worker that reads stdin (pdb, input(), torch.distributed.breakpoint()) shows
// its prompt and reads what is typed, and Ctrl-C reaches every worker from the terminal itself.
// ddprun's workers lead process groups of their own (the agent signals each worker's whole tree
// with one killpg), which at a terminal are background groups: a read stops them with SIGTTIN.
// So, only when ddprun's stdin is a terminal whose foreground process group is ddprun's own:
//   * each worker joins ddprun's process group instead of leading its own (its guardian still
//     leads its own, so nothing a worker started can outlive it or ddprun: guardian.hpp);
//   * signals meant for one worker reach it and every process below it (signalWorker);
//   * a signal the terminal itself sent (si_code SI_KERNEL: Ctrl-C, Ctrl-\, a hang-up) reached
//     every worker already and is not forwarded again (the supervisor's rule).
// And, stream by stream, when ddprun's stdout (stderr) is a terminal and a worker's stdout
// (stderr) goes to the console, the worker writes it to a pseudo-terminal of its own instead of a
// pipe: C stdio and Python line-buffer it as on a terminal, so a crashing worker's last lines are
// shown and kept. The pseudo-terminal is raw (no output processing: the bytes reach the console
// and the log files exactly as written) and as wide as ddprun's terminal less the line prefix.
// Without a terminal nothing of this applies: own groups, pipes, forwarded signals.
//
// Thread safety: the functions are reentrant; TerminalModes is used from one thread.
#pragma once

#include <sys/types.h>
#include <termios.h>

#include <optional>

namespace ddp {

// What the agent's terminal offers its workers (detectTerminal).
struct TerminalPlan {
  pid_t foregroundGroup = 0;  // > 0: workers join this process group (ddprun's, the foreground)
  bool stdoutPty = false;     // the console's stdout is a terminal
  bool stderrPty = false;     // the console's stderr is a terminal
  unsigned short columns = 0;  // the console terminal's size (0: unknown)
  unsigned short rows = 0;
};

// One worker's share of the plan (WorkerSpec::terminal).
struct WorkerTerminal {
  pid_t joinGroup = 0;    // > 0: the worker joins this process group instead of leading its own
  bool stdoutPty = false;  // its stdout (stderr) is a pseudo-terminal instead of a pipe
  bool stderrPty = false;
  unsigned short columns = 0;  // the pseudo-terminals' size (0: left at the kernel's 0 x 0)
  unsigned short rows = 0;
};

// The plan for an agent whose console lines go to `consoleOut` and `consoleErr`: foregroundGroup
// when stdin (fd 0) is a terminal whose foreground group is this process's; a pty per console
// stream that is a terminal. Non-blocking; never throws.
TerminalPlan detectTerminal(int consoleOut, int consoleErr);

// A read end and a write end for one worker stream: a pipe, or (pty) a raw pseudo-terminal of
// `columns` x `rows` whose master is the read end. Both close-on-exec. A pty that cannot be made
// falls back to a pipe. Throws Error when neither can be made.
struct StreamEnds {
  int read = -1;
  int write = -1;
};
StreamEnds makeStreamEnds(bool pty, unsigned short columns, unsigned short rows);

// Sends `signal` to a worker and what it started: its process group when it leads one (killpg),
// else the worker and every process below it (found through /proc). Non-blocking; errors ignored
// (a worker that just exited).
void signalWorker(pid_t worker, int signal);

// The terminal modes of stdin, taken when made (only when stdin is a terminal) and put back by
// restore(): a worker killed inside readline (pdb, input()) leaves the terminal raw.
class TerminalModes {
 public:
  TerminalModes();
  // Puts the modes back (TCSADRAIN) when they were taken. Idempotent; never throws.
  void restore() const;

 private:
  std::optional<struct termios> saved_;
};

}  // namespace ddp
