// HangWatch: which of a node's workers hang — the decisions of hang detection, without I/O
// (hang_monitor.hpp feeds it events and acts on its verdicts). Times are passed in, so tests drive
// it without sleeping.
//
// Progress, with --hang-timeout S (0 = off):
//   * a worker that ever sent a progress beat (worker_runtime's reportProgress, once per training
//     step) is judged by its beats alone: S seconds without a beat and it hangs;
//   * any other worker is judged by activity — output, CPU time, timer requests (hang_monitor.hpp
//     samples output and CPU on a tick): S seconds with none of them and it hangs.
//   A hung collective stops all its ranks at once, within moments of each other, and each of them
//   deserves a stack. So when one worker hangs, every other worker of the node silent for at least
//   S/2 is taken as hung with it (a healthy worker is never silent that long: it beats every step).
//   Hung workers are listed in the order of their last progress events (an event counter, not a
//   clock): a worker that never made progress first, then the one that went quiet first.
// File timers (torch's protocol, file_timer_request.hpp), with or without --hang-timeout: an
// acquired timer whose Unix deadline passed is a hang of the worker whose process set it, as in
// torch: the timer's process is the one to take stacks from and to end with the timer's signal.
// Of several expired timers of one process the earliest with a signal > 0 counts; expired timers
// with no signal are dropped with a note (torch only logs them). A release removes the timer.
// Each worker gets at most one verdict per generation; exited and hung workers are not watched.
//
// Thread safety: a plain object; use from one thread.
#pragma once

#include <sys/types.h>

#include <chrono>
#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "launcher/workers/hang_verdict.hpp"

namespace ddp {

struct HangCheck {
  std::vector<HangVerdict> hangs;   // in the order described above (file timers first)
  std::vector<std::string> notes;   // expired timers without a signal, for the log
};

class HangWatch {
 public:
  using Clock = std::chrono::steady_clock;

  // `workerPids[i]` is local rank i's pid. `timeout` 0 = progress is not judged (file timers only).
  HangWatch(std::chrono::milliseconds timeout, std::vector<pid_t> workerPids, Clock::time_point start);

  // Events, each from local rank `lr` (0 <= lr < number of workers); ignored for a worker that
  // exited or hung. A beat makes the worker a beat-judged one.
  void beat(int lr, std::optional<int64_t> step, Clock::time_point now);
  void activity(int lr, Clock::time_point now);
  // torch's acquire / release from process `pid` (the worker or one of its children).
  void acquire(int lr, pid_t pid, const std::string& scope, double deadlineUnix, int signal);
  void release(int lr, pid_t pid, const std::string& scope);
  void exited(int lr);
  // Local rank `lr` runs a new process `pid` (replaced in place): watched afresh from `now`.
  void restarted(int lr, pid_t pid, Clock::time_point now);

  // The verdicts due at `now` (steady) / `nowUnix` (file-timer deadlines). Hung workers leave the
  // watch.
  HangCheck check(Clock::time_point now, double nowUnix);

  // When check() next has something to decide; nullopt when nothing is watched.
  std::optional<Clock::time_point> nextDeadline(Clock::time_point now, double nowUnix) const;

  // True while `lr` is judged by activity (no beat yet), alive and not hung: it needs sampling.
  bool needsSampling(int lr) const;
  std::size_t size() const { return workers_.size(); }

 private:
  struct Timer {
    double deadlineUnix = 0;
    int signal = 0;
  };
  struct Worker {
    pid_t pid = 0;
    bool watched = true;  // alive and not hung
    bool beats = false;
    Clock::time_point lastProgress;
    uint64_t lastEvent = 0;  // 0 = no progress event yet
    std::optional<int64_t> lastStep;
    std::map<std::pair<pid_t, std::string>, Timer> timers;
  };
  void expiredTimers(double nowUnix, HangCheck& out);
  void silentWorkers(Clock::time_point now, HangCheck& out);
  std::string silence(const Worker& w, Clock::time_point now) const;

  std::chrono::milliseconds timeout_;
  std::vector<Worker> workers_;
  uint64_t events_ = 0;
};

}  // namespace ddp
