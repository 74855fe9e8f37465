#include "worker_runtime/progress.hpp"

#include <fcntl.h>
#include <signal.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <chrono>
#include <cmath>
#include <cstdio>
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
  // Compute seconds and steps reported since the last beat went out.
  double computeSum = 0;
  int64_t computeSteps = 0;
};

// -1 = no step reported yet (steps are counts, never negative).
std::atomic<int64_t> lastStep{-1};

Reporter& reporter() {
  static Reporter r;
  return r;
}

// One line of the file-timer protocol (release of "ddprun.progress", plus the step and, when
// known, the mean compute seconds per step since the last beat: "%.9g" keeps nanoseconds).
std::string beatLine(int64_t step, std::optional<double> computeS) {
  std::string compute;
  if (computeS) {
    char buf[48];
    std::snprintf(buf, sizeof buf, ", \"compute_s\": %.9g", *computeS);
    compute = buf;
  }
  return "{\"version\": 1, \"pid\": " + std::to_string(::getpid()) +
         ", \"scope_id\": \"ddprun.progress\", \"expiration_time\": -1, \"signal\": 0, \"step\": " +
         std::to_string(step) + compute + "}\n";
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

void report(int64_t step, std::optional<double> computeSeconds) {
  lastStep.store(step, std::memory_order_relaxed);
  Reporter& r = reporter();
  std::string path;
  std::optional<double> mean;
  {
    std::lock_guard<std::mutex> lock(r.mutex);
    if (!r.started) {
      r.started = true;
      const char* env = std::getenv("DDP_PROGRESS_FILE");
      r.path = env != nullptr ? env : "";
    }
    if (r.path.empty()) return;
    if (computeSeconds) {
      r.computeSum += *computeSeconds;
      ++r.computeSteps;
    }
    const auto now = std::chrono::steady_clock::now();
    if (now - r.lastSent < kMinInterval) return;
    r.lastSent = now;
    path = r.path;
    if (r.computeSteps > 0) mean = r.computeSum / double(r.computeSteps);
    r.computeSum = 0;
    r.computeSteps = 0;
  }
  send(path, beatLine(step, mean));
}

}  // namespace

std::optional<int64_t> lastReportedStep() {
  const int64_t step = lastStep.load(std::memory_order_relaxed);
  return step >= 0 ? std::optional<int64_t>(step) : std::nullopt;
}

void reportProgress(int64_t step) { report(step, std::nullopt); }

void reportProgress(int64_t step, double computeSeconds) {
  const bool valid = std::isfinite(computeSeconds) && computeSeconds >= 0;
  report(step, valid ? std::optional<double>(computeSeconds) : std::nullopt);
}

}  // namespace ddp
