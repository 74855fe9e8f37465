#include "launcher/workers/guardian.hpp"

#include <fcntl.h>
#include <sched.h>
#include <signal.h>
#include <sys/prctl.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

#include "launcher/numa/cpu_binding.hpp"
#include "launcher/workers/process_tree.hpp"
#include "rendezvous/base/fd_limit.hpp"

// Everything below runs in a child forked from the multi-threaded agent: async-signal-safe system
// calls only (no allocation, no stdio, no locks, no exceptions).
namespace ddp {
namespace {

// Closes every descriptor except those in keep[0..n) (n small).
void closeAllExcept(int* keep, int n) {
  for (int i = 1; i < n; ++i) {  // insertion sort
    for (int j = i; j > 0 && keep[j - 1] > keep[j]; --j) {
      const int t = keep[j];
      keep[j] = keep[j - 1];
      keep[j - 1] = t;
    }
  }
  unsigned next = 0;
  for (int i = 0; i < n; ++i) {
    if (keep[i] < 0) continue;
    const auto fd = static_cast<unsigned>(keep[i]);
    if (fd > next) ::close_range(next, fd - 1, 0);
    next = fd + 1;
  }
  ::close_range(next, ~0U, 0);
}

// The caught-signal mask (SigCgt of /proc/self/status), so that only those need a system call;
// all ones when it cannot be read.
unsigned long long caughtSignals() {
  const int fd = ::open("/proc/self/status", O_RDONLY | O_CLOEXEC);
  if (fd < 0) return ~0ULL;
  char buf[2048];
  ssize_t n;
  do {
    n = ::read(fd, buf, sizeof(buf) - 1);
  } while (n < 0 && errno == EINTR);
  ::close(fd);
  if (n <= 0) return ~0ULL;
  buf[n] = '\0';
  const char* p = std::strstr(buf, "SigCgt:");
  if (p == nullptr) return ~0ULL;
  for (p += 7; *p == ' ' || *p == '\t'; ++p) {
  }
  unsigned long long mask = 0;
  for (;; ++p) {
    const char c = *p;
    const int digit = c >= '0' && c <= '9' ? c - '0' : c >= 'a' && c <= 'f' ? c - 'a' + 10 : -1;
    if (digit < 0) break;
    mask = (mask << 4) | static_cast<unsigned>(digit);
  }
  return mask;
}

// Handlers inherited from the agent must not run here: back to the default action. Ignored
// signals stay ignored (SIGHUP under nohup reaches the worker ignored, as the shell meant).
void resetHandlers() {
  const unsigned long long caught = caughtSignals();
  for (int sig = 1; sig < NSIG && sig <= 64; ++sig) {
    if (sig == SIGKILL || sig == SIGSTOP || ((caught >> (sig - 1)) & 1) == 0) continue;
    struct sigaction old {};
    if (::sigaction(sig, nullptr, &old) != 0) continue;
    if (old.sa_handler == SIG_DFL || old.sa_handler == SIG_IGN) continue;
    struct sigaction dfl {};
    dfl.sa_handler = SIG_DFL;
    ::sigaction(sig, &dfl, nullptr);
  }
}

void report(int fd, GuardianReport::Kind kind, pid_t worker, int value) {
  GuardianReport r;
  r.kind = kind;
  r.pid = worker;
  r.value = value;
  while (::write(fd, &r, sizeof(r)) < 0 && errno == EINTR) {
  }
}

// Starts the worker; returns its pid (and the exec errno in `execErrno`, 0 when it runs).
pid_t startWorker(const GuardianPlan& plan, int& execErrno) {
  const pid_t guardian = ::getpid();
  volatile int childErrno = 0;  // written by the vfork child, which shares our memory
  const pid_t pid = ::vfork();
  if (pid == 0) {
    // Joining the terminal's foreground group can only fail when that group is gone (ddprun is
    // exiting): the worker then leads its own, as without a terminal.
    if (plan.joinGroup <= 0 || ::setpgid(0, plan.joinGroup) != 0) ::setpgid(0, 0);
    if (::prctl(PR_SET_PDEATHSIG, SIGKILL) != 0 || ::getppid() != guardian) {
      childErrno = errno != 0 ? errno : ESRCH;
      ::_exit(127);
    }
    struct sigaction dfl {};
    dfl.sa_handler = SIG_DFL;
    ::sigaction(SIGPIPE, &dfl, nullptr);  // the agent ignores it; workers get the default back
    if (::dup2(plan.stdoutFd, STDOUT_FILENO) < 0 || ::dup2(plan.stderrFd, STDERR_FILENO) < 0) {
      childErrno = errno;
      ::_exit(127);
    }
    ::close_range(3, ~0U, 0);
    sigset_t none;
    sigemptyset(&none);
    ::sigprocmask(SIG_SETMASK, &none, nullptr);
    ::execve(plan.program, plan.argv, plan.envp);
    childErrno = errno;
    ::_exit(127);
  }
  execErrno = pid < 0 ? errno : childErrno;
  // Once it runs its program, not before: under SCHED_IDLE on busy CPUs the exec itself could take
  // long, and the agent waits for this report. Its threads, started later, inherit the policy.
  if (pid > 0 && execErrno == 0 && plan.idlePriority) {
    const sched_param param{};
    ::sched_setscheduler(pid, SCHED_IDLE, &param);
  }
  return pid;
}

// Kills and reaps everything left below the guardian.
void clearTree() {
  if (hasChildren()) killAllDescendants();
}

// Leaves exactly as the worker did: the same exit code, or death by the same signal.
[[noreturn]] void exitLike(int status) {
  if (WIFSIGNALED(status)) {
    const int sig = WTERMSIG(status);
    const struct rlimit noCore = {0, 0};
    ::setrlimit(RLIMIT_CORE, &noCore);
    struct sigaction dfl {};
    dfl.sa_handler = SIG_DFL;
    ::sigaction(sig, &dfl, nullptr);
    ::kill(::getpid(), sig);
    sigset_t one;
    sigemptyset(&one);
    sigaddset(&one, sig);
    ::sigprocmask(SIG_UNBLOCK, &one, nullptr);
    ::_exit(128 + sig);  // a signal whose default action does not terminate
  }
  ::_exit(WIFEXITED(status) ? WEXITSTATUS(status) : 1);
}

// Reaps what has exited below the guardian. Returns true with the worker's raw wait status once the
// worker exited; its process group is SIGKILLed first, while its zombie still holds the group id.
bool reapExited(pid_t worker, int& status) {
  for (;;) {
    siginfo_t info;
    info.si_pid = 0;
    if (::waitid(P_ALL, 0, &info, WEXITED | WNOHANG | WNOWAIT) != 0 || info.si_pid == 0) {
      return false;
    }
    if (info.si_pid == worker) {
      if (::getpgid(worker) == worker) ::killpg(worker, SIGKILL);  // the zombie holds the group
      while (::waitpid(worker, &status, 0) < 0 && errno == EINTR) {
      }
      return true;
    }
    ::waitpid(info.si_pid, nullptr, 0);  // an orphan adopted from below: it exits silently
  }
}

// The plan's file goes with the guardian; its folder with the agent (the folder's last file
// removes it: the agent's other guardians remove theirs on the same parent-death signal).
void removeOwned(const GuardianPlan& plan, bool agentGone) {
  if (plan.ownedFile != nullptr) ::unlink(plan.ownedFile);
  if (agentGone && plan.ownedDir != nullptr) ::rmdir(plan.ownedDir);
}

// Returns when the worker exited, with its raw wait status; exits when the agent is gone.
int watch(const GuardianPlan& plan, pid_t worker) {
  sigset_t all;
  sigfillset(&all);
  for (;;) {
    siginfo_t info;
    ::sigwaitinfo(&all, &info);
    if (::getppid() != plan.agent) {
      if (::getpgid(worker) == worker) ::killpg(worker, SIGKILL);
      ::kill(worker, SIGKILL);
      clearTree();
      removeOwned(plan, /*agentGone=*/true);
      ::_exit(1);
    }
    int status = 0;
    if (reapExited(worker, status)) return status;
  }
}

}  // namespace

void runGuardian(const GuardianPlan& plan) noexcept {
  sigset_t all;
  sigfillset(&all);
  ::sigprocmask(SIG_SETMASK, &all, nullptr);
  resetHandlers();
  ::setpgid(0, 0);
  if (::prctl(PR_SET_PDEATHSIG, kGuardianDeathSignal) != 0 || ::getppid() != plan.agent) {
    removeOwned(plan, /*agentGone=*/true);
    ::_exit(1);  // the agent died before the parent-death signal was armed
  }
  ::prctl(PR_SET_CHILD_SUBREAPER, 1);
  ::prctl(PR_SET_NAME, "ddprun-guardian");  // what ps -o comm and top show (argv stays ddprun's)
  int keep[] = {STDIN_FILENO, STDOUT_FILENO, STDERR_FILENO, plan.stdoutFd, plan.stderrFd,
                plan.reportFd};
  closeAllExcept(keep, sizeof(keep) / sizeof(keep[0]));
  // The agent raised its soft descriptor limit for the stores it hosts; the worker starts with
  // the one the agent was given, as under torchrun (select() breaks past 1024).
  restoreInheritedFdLimit();

  if (plan.binding != nullptr) {
    const int bindErrno = applyCpuBinding(*plan.binding);  // inherited by the worker
    if (bindErrno != 0) {
      report(plan.reportFd, GuardianReport::kBindFailed, 0, bindErrno);
      ::_exit(127);
    }
  }
  int execErrno = 0;
  const pid_t worker = startWorker(plan, execErrno);
  if (worker < 0 || execErrno != 0) {
    if (worker > 0) ::waitpid(worker, nullptr, 0);
    report(plan.reportFd, GuardianReport::kStarted, worker, execErrno != 0 ? execErrno : EAGAIN);
    ::_exit(127);
  }
  report(plan.reportFd, GuardianReport::kStarted, worker, 0);
  ::close(plan.stdoutFd);  // the worker holds the pipes now: EOF when it and its tree are gone
  ::close(plan.stderrFd);

  const int status = watch(plan, worker);
  clearTree();
  removeOwned(plan, /*agentGone=*/::getppid() != plan.agent);
  report(plan.reportFd, GuardianReport::kExited, worker, status);
  exitLike(status);
}

}  // namespace ddp
