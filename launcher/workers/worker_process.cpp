#include "launcher/workers/worker_process.hpp"

#include <fcntl.h>
#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <sys/mman.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <exception>
#include <filesystem>
#include <fstream>
#include <sstream>

#include "launcher/workers/guardian.hpp"

namespace ddp {
namespace {

struct Pipe {
  int read = -1;
  int write = -1;
};

Pipe makePipe() {
  int fds[2];
  if (::pipe2(fds, O_CLOEXEC) != 0) {
    throw Error(std::string("cannot create a pipe for a worker: ") + std::strerror(errno));
  }
  return {fds[0], fds[1]};
}

void closeFd(int& fd) {
  if (fd >= 0) ::close(fd);
  fd = -1;
}

std::vector<char*> cStrings(std::vector<std::string>& storage) {
  std::vector<char*> out;
  for (auto& s : storage) out.push_back(s.data());
  out.push_back(nullptr);
  return out;
}

// Forks the guardian with every signal blocked in this thread, so that no handler of the agent
// runs in the child before runGuardian() resets them. Returns fork's result and errno.
pid_t forkGuardian(const GuardianPlan& plan, int& forkErrno) {
  sigset_t all, old;
  sigfillset(&all);
  ::pthread_sigmask(SIG_SETMASK, &all, &old);
  const pid_t pid = ::fork();
  if (pid == 0) runGuardian(plan);
  forkErrno = errno;
  ::pthread_sigmask(SIG_SETMASK, &old, nullptr);
  return pid;
}

bool readReport(int fd, GuardianReport& r) {
  ssize_t n;
  do {
    n = ::read(fd, &r, sizeof(r));
  } while (n < 0 && errno == EINTR);
  return n == static_cast<ssize_t>(sizeof(r));
}

void reap(pid_t pid) {
  while (::waitpid(pid, nullptr, 0) < 0 && errno == EINTR) {
  }
}

}  // namespace

std::string resolveProgram(const std::string& program, const std::string& path) {
  if (program.empty()) return "";
  if (program.find('/') != std::string::npos) return program;
  std::stringstream dirs(path);
  std::string dir;
  while (std::getline(dirs, dir, ':')) {
    const std::string candidate = (dir.empty() ? "." : dir) + "/" + program;
    if (::access(candidate.c_str(), X_OK) == 0) return candidate;
  }
  return "";
}

namespace {

// A guardian forked and not yet heard from: guardianPid and the read ends are set, pid is not.
struct Pending {
  std::string program;
  SpawnedProcess process;
};

Pending forkWorker(const WorkerSpec& spec) {
  const std::vector<std::string>& argv = spec.argv;
  const EnvMap& env = spec.env;
  if (argv.empty()) throw SpawnError("no worker command given");
  auto pathIt = env.find("PATH");
  Pending p;
  p.program = resolveProgram(argv[0],
                             pathIt == env.end() ? "/usr/local/bin:/usr/bin:/bin" : pathIt->second);
  if (p.program.empty()) throw SpawnError("cannot run '" + argv[0] + "': not found on PATH");

  // Everything the child needs is built before fork: the child may not allocate.
  std::vector<std::string> argStorage = argv;
  std::vector<std::string> envStorage;
  for (const auto& [key, value] : env) envStorage.push_back(key + "=" + value);
  std::vector<char*> cArgv = cStrings(argStorage);
  std::vector<char*> cEnv = cStrings(envStorage);

  const WorkerTerminal& tty = spec.terminal;
  const StreamEnds outEnds = makeStreamEnds(tty.stdoutPty, tty.columns, tty.rows);
  Pipe out{outEnds.read, outEnds.write};
  Pipe err, report;
  try {
    const StreamEnds errEnds = makeStreamEnds(tty.stderrPty, tty.columns, tty.rows);
    err = {errEnds.read, errEnds.write};
    report = makePipe();
  } catch (...) {
    closeFd(out.read), closeFd(out.write), closeFd(err.read), closeFd(err.write);
    throw;
  }
  const std::string ownedDir =
      spec.ownedFile.empty() ? "" : std::filesystem::path(spec.ownedFile).parent_path().string();
  GuardianPlan plan;
  plan.agent = ::getpid();
  plan.program = p.program.c_str();
  plan.argv = cArgv.data();
  plan.envp = cEnv.data();
  plan.stdoutFd = out.write;
  plan.stderrFd = err.write;
  plan.reportFd = report.write;
  plan.binding = spec.binding ? &*spec.binding : nullptr;
  plan.joinGroup = tty.joinGroup;
  plan.ownedFile = spec.ownedFile.empty() ? nullptr : spec.ownedFile.c_str();
  plan.ownedDir = ownedDir.empty() ? nullptr : ownedDir.c_str();
  plan.idlePriority = spec.idlePriority;
  int forkErrno = 0;
  const pid_t guardian = forkGuardian(plan, forkErrno);
  closeFd(out.write);
  closeFd(err.write);
  closeFd(report.write);
  if (guardian < 0) {
    closeFd(out.read), closeFd(err.read), closeFd(report.read);
    throw Error(std::string("cannot fork a worker: ") + std::strerror(forkErrno));
  }
  ::setpgid(guardian, guardian);  // also in the child: whichever runs first wins harmlessly
  p.process.guardianPid = guardian;
  p.process.stdoutFd = out.read;
  p.process.stderrFd = err.read;
  p.process.reportFd = report.read;
  return p;
}

// Waits for the guardian's start record. Throws, after reaping the guardian and closing its
// pipes, when the worker did not start.
SpawnedProcess awaitStart(Pending& p) {
  SpawnedProcess& s = p.process;
  GuardianReport started;
  const bool read = readReport(s.reportFd, started);
  const bool heard = read && started.kind == GuardianReport::kStarted;
  if (!heard || started.value != 0) {
    reap(s.guardianPid);
    closeHandles(s);
    if (read && started.kind == GuardianReport::kBindFailed) {
      throw SpawnError("cannot apply the --numa-binding of worker '" + p.program +
                       "': " + std::strerror(started.value));
    }
    if (!heard) throw Error("the guardian of worker '" + p.program + "' ended before starting it");
    throw SpawnError("cannot run '" + p.program + "': " + std::strerror(started.value));
  }
  s.pid = started.pid;
  s.pidFd = static_cast<int>(::syscall(SYS_pidfd_open, started.pid, 0));
  return s;
}

// Kills a started worker (its guardian clears the rest), reaps the guardian, closes everything.
void discard(SpawnedProcess& s) {
  signalWorker(s.pid, SIGKILL);
  reap(s.guardianPid);
  closeHandles(s);
}

}  // namespace

std::vector<SpawnedProcess> spawnWorkers(const std::vector<WorkerSpec>& specs) {
  std::vector<Pending> pending;
  std::exception_ptr error;
  for (const auto& spec : specs) {  // every guardian forks first: they start their workers at once
    try {
      pending.push_back(forkWorker(spec));
    } catch (...) {
      error = std::current_exception();
      break;
    }
  }
  std::vector<SpawnedProcess> started;
  for (auto& p : pending) {
    try {
      started.push_back(awaitStart(p));
    } catch (...) {
      if (!error) error = std::current_exception();
    }
  }
  if (error) {
    for (auto& s : started) discard(s);
    std::rethrow_exception(error);
  }
  return started;
}

SpawnedProcess spawnWorker(const std::vector<std::string>& argv, const EnvMap& env) {
  WorkerSpec spec;
  spec.argv = argv;
  spec.env = env;
  return spawnWorkers({spec}).front();
}

namespace {

// /dev/shm/ddprun-allreduce-<pid>-* (trainer/shm_allreduce.cpp names its segments so).
void removeSegmentsOf(pid_t worker) {
  const std::string prefix = "ddprun-allreduce-" + std::to_string(worker) + "-";
  std::error_code ec;
  for (std::filesystem::directory_iterator it("/dev/shm", ec), end; !ec && it != end;
       it.increment(ec)) {
    const std::string name = it->path().filename().string();
    if (name.compare(0, prefix.size(), prefix) == 0) ::shm_unlink(("/" + name).c_str());
  }
}

}  // namespace

int workerExitStatus(const SpawnedProcess& process, int guardianStatus, bool& reported) {
  if (process.pid > 0) removeSegmentsOf(process.pid);
  GuardianReport exited;
  // The guardian is gone, so the pipe holds its last record or is at EOF: this never blocks.
  reported = process.reportFd >= 0 && readReport(process.reportFd, exited) &&
             exited.kind == GuardianReport::kExited;
  return reported ? exited.value : guardianStatus;
}

bool hasExited(const SpawnedProcess& process) {
  if (process.pidFd >= 0) {
    pollfd p{process.pidFd, POLLIN, 0};
    int r;
    do {
      r = ::poll(&p, 1, 0);
    } while (r < 0 && errno == EINTR);
    return r > 0;  // a pidfd is readable once its process exited
  }
  if (::kill(process.pid, 0) != 0) return errno == ESRCH;
  std::ifstream stat("/proc/" + std::to_string(process.pid) + "/stat");
  std::string all;
  std::getline(stat, all);
  const auto close = all.rfind(')');
  return close != std::string::npos && close + 2 < all.size() && all[close + 2] == 'Z';
}

void closeHandles(SpawnedProcess& process) {
  closeFd(process.stdoutFd);
  closeFd(process.stderrFd);
  closeFd(process.reportFd);
  closeFd(process.pidFd);
}

}  // namespace ddp
