#include "launcher/workers/standby_pool.hpp"

#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <sys/ioctl.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <filesystem>

#include "launcher/workers/idle_priority.hpp"
#include "rendezvous/base/error.hpp"
#include "rendezvous/base/logging.hpp"
#include "rendezvous/base/signal_name.hpp"
#include "rendezvous/quorum/standby_message.hpp"

namespace ddp {
namespace {

// What names a worker's place in the job: a standby has none until it is taken.
constexpr const char* kRankVariables[] = {
    "RANK", "LOCAL_RANK", "GROUP_RANK", "ROLE_RANK", "WORLD_SIZE", "LOCAL_WORLD_SIZE",
    "GROUP_WORLD_SIZE", "ROLE_WORLD_SIZE", "MASTER_ADDR", "MASTER_PORT",
    "TORCHELASTIC_RESTART_COUNT", "TORCHELASTIC_ERROR_FILE", "DDP_QUORUM_BOARD", "DDP_QUORUM_SLOT",
    "DDP_STATE_FROM_PEER"};

std::string describeStatus(int status) {
  if (WIFEXITED(status)) return "exited with " + std::to_string(WEXITSTATUS(status));
  if (WIFSIGNALED(status)) return "was killed by " + signalName(WTERMSIG(status));
  return "ended (status " + std::to_string(status) + ")";
}

// The last line a standby wrote to stderr before it exited (its pipe is not read before).
std::string lastLine(int fd) {
  if (fd < 0) return "";
  ::fcntl(fd, F_SETFL, ::fcntl(fd, F_GETFL) | O_NONBLOCK);
  std::string all;
  char buf[4096];
  ssize_t n;
  while ((n = ::read(fd, buf, sizeof buf)) > 0 && all.size() < (1u << 20)) {
    all.append(buf, std::size_t(n));
  }
  while (!all.empty() && all.back() == '\n') all.pop_back();
  const std::size_t nl = all.rfind('\n');
  return nl == std::string::npos ? all : all.substr(nl + 1);
}

}  // namespace

StandbyPool::StandbyPool(boost::asio::io_context& io, ChildReaper& reaper, WorkerSpec spec,
                         int count)
    : io_(io), reaper_(reaper), spec_(std::move(spec)), count_(std::size_t(count)), refill_(io) {
  for (const char* name : kRankVariables) spec_.env.erase(name);
  returnPolicy_ = idleReturnPolicy();
  spec_.idlePriority = returnPolicy_ >= 0;
  if (!spec_.idlePriority) {
    logger("agent")->info("standby processes prepare at this agent's CPU priority: it cannot move "
                          "a process back out of SCHED_IDLE (that needs CAP_SYS_NICE or an "
                          "RLIMIT_NICE of at least 20 - nice), or runs under a policy other than "
                          "SCHED_OTHER and SCHED_BATCH");
  }
  std::string pattern =
      (std::filesystem::temp_directory_path() / "ddprun-standby-XXXXXX").string();
  if (::mkdtemp(pattern.data()) == nullptr) {
    throw Error("cannot create a directory for standby processes' FIFOs: " +
                std::string(std::strerror(errno)));
  }
  dir_ = pattern;
  while (standbys_.size() < count_ && canStart()) startOne();
}

StandbyPool::~StandbyPool() {
  for (auto& s : standbys_) release(*s, /*kill=*/true);
  for (const auto& h : handedOver_) ::close(h.fd);
  std::error_code ec;
  std::filesystem::remove_all(dir_, ec);
}

void StandbyPool::startOne() {
  auto s = std::make_unique<Standby>();
  s->fifo = dir_ + "/" + std::to_string(++made_);
  if (::mkfifo(s->fifo.c_str(), 0600) != 0 ||
      (s->fd = ::open(s->fifo.c_str(), O_RDWR | O_NONBLOCK | O_CLOEXEC)) < 0) {
    logger("agent")->warn("no standby process: cannot make its FIFO {}: {}", s->fifo,
                          std::strerror(errno));
    ::unlink(s->fifo.c_str());
    disabled_ = true;
    return;
  }
  // Room for the whole message even while the standby still prepares (best effort: 64 KiB else).
  ::fcntl(s->fd, F_SETPIPE_SZ, 1 << 20);
  WorkerSpec spec = spec_;
  spec.env[kStandbyEnv] = s->fifo;
  spec.ownedFile = s->fifo;  // its guardian unlinks it, and the folder after kill -9 of the agent
  try {
    s->proc = spawnWorkers({spec})[0];
  } catch (const Error& e) {
    logger("agent")->warn("no standby process: {}", e.what());
    ::close(s->fd);
    ::unlink(s->fifo.c_str());
    disabled_ = true;
    return;
  }
  const pid_t guardian = s->proc.guardianPid;
  reaper_.watch(guardian, [this, alive = std::weak_ptr<int>(alive_)](pid_t pid, int status) {
    if (!alive.expired()) onEarlyExit(pid, status);
  });
  logger("agent")->info("standby process {} started (it takes the place of the next failed worker)",
                        s->proc.pid);
  standbys_.push_back(std::move(s));
}

void StandbyPool::onEarlyExit(pid_t guardianPid, int guardianStatus) {
  auto it = std::find_if(standbys_.begin(), standbys_.end(),
                         [&](const auto& s) { return s->proc.guardianPid == guardianPid; });
  if (it == standbys_.end()) return;
  bool reported = true;
  const int status = workerExitStatus((*it)->proc, guardianStatus, reported);
  const std::string last = lastLine((*it)->proc.stderrFd);
  ++earlyExits_;
  logger("agent")->warn("standby process {} {} before it was needed{}{}{}", (*it)->proc.pid,
                        describeStatus(status), last.empty() ? "" : ": ", last,
                        canStart() ? "" : "; no more standby processes until the workers restart");
  (*it)->proc.guardianPid = -1;  // reaped
  release(**it, /*kill=*/false);
  standbys_.erase(it);
  // Its guardian was killed: the standby died of its parent-death signal and is a child of this
  // process now (ChildReaper's subreaper), reaped here as WorkerGroup does for a worker's.
  if (!reported) reaper_.sweepStrays();
  if (canStart()) startOne();
}

void StandbyPool::release(Standby& s, bool kill) {
  if (kill && s.proc.guardianPid > 0) {
    reaper_.forget(s.proc.guardianPid);
    signalWorker(s.proc.pid, SIGKILL);
    while (::waitpid(s.proc.guardianPid, nullptr, 0) < 0 && errno == EINTR) {
    }
    s.proc.guardianPid = -1;
  }
  closeHandles(s.proc);
  if (s.fd >= 0) ::close(s.fd);
  s.fd = -1;
  ::unlink(s.fifo.c_str());
}

void StandbyPool::pruneHandedOver() {
  std::erase_if(handedOver_, [](const HandedOver& h) {
    int unread = 0;
    const bool read = ::ioctl(h.fd, FIONREAD, &unread) == 0 && unread == 0;
    if (!read && ::kill(h.pid, 0) == 0) return false;  // still to be read by a live process
    ::close(h.fd);
    ::unlink(h.fifo.c_str());
    return true;
  });
}

bool StandbyPool::handOver(Standby& s, const EnvMap& env) {
  EnvEntries entries(env.begin(), env.end());
  const std::string message = encodeStandbyMessage(entries);
  std::size_t done = 0;
  // Whether a standby that ended took the message: it read some of it. One dead before it read
  // any is a new process for the rank, not a failed worker to replace; one that read it and ended
  // at once (its program needed no time, or failed) served, as a new process would have.
  const auto readSome = [&] {
    int unread = 0;
    return done > 0 && ::ioctl(s.fd, FIONREAD, &unread) == 0 && std::size_t(unread) < done;
  };
  if (hasExited(s.proc)) return false;
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(1);
  while (done < message.size()) {
    const ssize_t n = ::write(s.fd, message.data() + done, message.size() - done);
    if (n > 0) {
      done += std::size_t(n);
      continue;
    }
    if (n < 0 && errno != EAGAIN && errno != EINTR) return false;
    if (hasExited(s.proc)) return readSome();
    if (std::chrono::steady_clock::now() >= deadline) return false;
    const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(
        deadline - std::chrono::steady_clock::now());
    pollfd p{s.fd, POLLOUT, 0};
    ::poll(&p, 1, int(std::clamp<int64_t>(left.count(), 1, 50)));
  }
  return !hasExited(s.proc) || readSome();
}

std::optional<SpawnedProcess> StandbyPool::take(const std::vector<std::string>& argv,
                                                const EnvMap& env) {
  if (argv != spec_.argv || standbys_.empty()) return std::nullopt;
  std::unique_ptr<Standby> s = std::move(standbys_.front());
  standbys_.erase(standbys_.begin());
  pruneHandedOver();
  std::optional<SpawnedProcess> taken;
  // At the workers' priority before it reads the message: the recovery waits for it from now on.
  if (spec_.idlePriority) leaveIdlePriority(s->proc.guardianPid, returnPolicy_);
  if (handOver(*s, env)) {
    reaper_.forget(s->proc.guardianPid);
    taken = s->proc;
    earlyExits_ = 0;  // a standby served: the program can wait as one, its budget is whole again
    // A standby still preparing has not opened the FIFO yet: the message lives while this end
    // is open, so it stays open (and the FIFO linked) until the standby read it all.
    handedOver_.push_back({s->fd, s->proc.pid, s->fifo});
    s->fd = -1;
    s->proc = SpawnedProcess{};  // the caller's now
    s->proc.guardianPid = -1;
  } else {
    logger("agent")->warn("standby process {} could not take a worker's place; it is ended and a "
                          "new process starts instead", s->proc.pid);
    release(*s, /*kill=*/true);
  }
  if (canStart()) {
    refill_.expires_after(kRefillDelay);
    refill_.async_wait(
        [this, alive = std::weak_ptr<int>(alive_)](const boost::system::error_code& ec) {
          if (ec || alive.expired()) return;
          pruneHandedOver();
          while (standbys_.size() < count_ && canStart()) startOne();
        });
  }
  return taken;
}

}  // namespace ddp
