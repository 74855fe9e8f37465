#include "launcher/worker_process.hpp"

#include <fcntl.h>
#include <signal.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <sstream>

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

// Runs in the child between fork and exec: async-signal-safe calls only.
[[noreturn]] void execChild(pid_t agent, const Pipe& out, const Pipe& err, const Pipe& status,
                            const char* program, char* const* argv, char* const* envp) {
  auto fail = [&](int code) {
    (void)!::write(status.write, &code, sizeof(code));
    ::_exit(127);
  };
  ::setpgid(0, 0);
  if (::prctl(PR_SET_PDEATHSIG, SIGKILL) != 0) fail(errno);
  if (::getppid() != agent) ::_exit(137);  // the agent died before prctl took effect
  sigset_t none;
  sigemptyset(&none);
  ::sigprocmask(SIG_SETMASK, &none, nullptr);
  ::signal(SIGPIPE, SIG_DFL);  // the agent ignores it; workers get the default back
  if (::dup2(out.write, STDOUT_FILENO) < 0 || ::dup2(err.write, STDERR_FILENO) < 0) fail(errno);
  // Close everything else above stderr except the status pipe (close-on-exec, it reports success
  // by closing).
  const unsigned keep = static_cast<unsigned>(status.write);
  if (keep > 3) ::close_range(3, keep - 1, 0);
  ::close_range(keep + 1, ~0U, 0);
  ::execve(program, argv, envp);
  fail(errno);
  ::_exit(127);
}

std::vector<char*> cStrings(std::vector<std::string>& storage) {
  std::vector<char*> out;
  for (auto& s : storage) out.push_back(s.data());
  out.push_back(nullptr);
  return out;
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

SpawnedProcess spawnWorker(const std::vector<std::string>& argv, const EnvMap& env) {
  if (argv.empty()) throw SpawnError("no worker command given");
  auto pathIt = env.find("PATH");
  const std::string program = resolveProgram(
      argv[0], pathIt == env.end() ? "/usr/local/bin:/usr/bin:/bin" : pathIt->second);
  if (program.empty()) throw SpawnError("cannot run '" + argv[0] + "': not found on PATH");

  // Everything the child needs is built before fork: the child may not allocate.
  std::vector<std::string> argStorage = argv;
  std::vector<std::string> envStorage;
  for (const auto& [key, value] : env) envStorage.push_back(key + "=" + value);
  std::vector<char*> cArgv = cStrings(argStorage);
  std::vector<char*> cEnv = cStrings(envStorage);

  Pipe out = makePipe(), err = makePipe(), status = makePipe();
  const pid_t agent = ::getpid();
  const pid_t pid = ::fork();
  if (pid == 0) execChild(agent, out, err, status, program.c_str(), cArgv.data(), cEnv.data());
  const int forkErrno = errno;
  closeFd(out.write);
  closeFd(err.write);
  closeFd(status.write);
  if (pid < 0) {
    closeFd(out.read), closeFd(err.read), closeFd(status.read);
    throw Error(std::string("cannot fork a worker: ") + std::strerror(forkErrno));
  }
  ::setpgid(pid, pid);  // also in the child: whichever runs first wins the race harmlessly

  int childErrno = 0;
  ssize_t n;
  do {
    n = ::read(status.read, &childErrno, sizeof(childErrno));
  } while (n < 0 && errno == EINTR);
  closeFd(status.read);
  if (n == static_cast<ssize_t>(sizeof(childErrno))) {
    ::waitpid(pid, nullptr, 0);
    closeFd(out.read), closeFd(err.read);
    throw SpawnError("cannot run '" + program + "': " + std::strerror(childErrno));
  }
  return {pid, out.read, err.read};
}

}  // namespace ddp
