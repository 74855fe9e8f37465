#include "worker_runtime/progress.hpp"

#include <fcntl.h>
#include <signal.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <chrono>
#include <cstdlib>
#include <mutex>
#include <string>

namespace ddp {
namespace {

constexpr auto kMinInterval = std::chrono::milliseconds(100);

struct Reporter {
  std::mutex mutex;
  // Guarded by mutex.
  bool started = false;
  std::string path;  // "" = not under a hang-detecting ddprun
  std::chrono::steady_clock::time_point lastSent{};
};

// -1 = no step reported yet (steps are counts, never negative).
std::atomic<int64_t> lastStep{-1};

Reporter& reporter() {
  static Reporter r;
  return r;
}

// One line of the file-timer protocol (release of "ddprun.progress", plus the step).
std::string beatLine(int64_t step) {
  return "{\"version\": 1, \"pid\": " + std::to_string(::getpid()) +
         ", \"scope_id\": \"ddprun.progress\", \"expiration_time\": -1, \"signal\": 0, \"step\": " +
         std::to_string(step) + "}\n";
}

// Writes `line` to the FIFO at `path` without blocking and without a SIGPIPE reaching the process
// (blocked in this thread for the write; one raised by it is consumed).
void send(const std::string& path, const std::string& line) {
  const int fd = ::open(path.c_str(), O_WRONLY | O_NONBLOCK | O_CLOEXEC);
  if (fd < 0) return;  // no reader (ENXIO): nobody listens now
  sigset_t pipe, old;
  sigemptyset(&pipe);
  sigaddset(&pipe, SIGPIPE);
  ::pthread_sigmask(SIG_BLOCK, &pipe, &old);
  ssize_t n;
  do {
    n = ::write(fd, line.data(), line.size());
  } while (n < 0 && errno == EINTR);
  if (n < 0 && errno == EPIPE) {
    const timespec zero{0, 0};
    ::sigtimedwait(&pipe, nullptr, &zero);
  }
  ::pthread_sigmask(SIG_SETMASK, &old, nullptr);
  ::close(fd);
}

}  // namespace

std::optional<int64_t> lastReportedStep() {
  const int64_t step = lastStep.load(std::memory_order_relaxed);
  return step >= 0 ? std::optional<int64_t>(step) : std::nullopt;
}

void reportProgress(int64_t step) {
  lastStep.store(step, std::memory_order_relaxed);
  Reporter& r = reporter();
  std::string path;
  {
    std::lock_guard<std::mutex> lock(r.mutex);
    if (!r.started) {
      r.started = true;
      const char* env = std::getenv("DDP_PROGRESS_FILE");
      r.path = env != nullptr ? env : "";
    }
    const auto now = std::chrono::steady_clock::now();
    if (r.path.empty() || now - r.lastSent < kMinInterval) return;
    r.lastSent = now;
    path = r.path;
  }
  send(path, beatLine(step));
}

}  // namespace ddp
