// HangMonitor: hang detection for one generation of this node's workers
// (docs/running.md#hang-detection---hang-timeout-torchs-file-timers).
// It feeds HangWatch (hang_watch.hpp, the decisions) with
//   * the requests on the agent's timer FIFO (file_timer_server.hpp): worker_runtime's progress
//     beats and torch's file timers, each matched to the worker whose process sent it (the worker
//     itself, its process group or a descendant; other senders are ignored with a note);
//   * output and CPU time of workers that never beat, sampled on a tick of --hang-timeout / 4
//     (0.1 to 1 s) — /proc is read only then, and only while such a worker runs. New output, or
//     CPU time grown by at least a tenth of a core since the last sample, is activity (less is the
//     housekeeping of idle runtime threads); so is waiting for a CPU at least half the time (a
//     worker starved on a loaded machine wants to run: it is not hung);
// and hands each verdict to its HungWorkers (hung_workers.hpp: the stacks, then the end of the
// worker); with --straggler-threshold it also hands the beats' compute times to the settings'
// StragglerWatch, afresh each generation. One steady_timer on the io_context, armed for the next
// deadline or sample: nothing polls, and with no deadline pending nothing runs. Verdicts that fall due while the group is being stopped are
// dropped: those workers are ending anyway.
//
// Thread safety: use from the io_context's thread only. Construct after the group started; destroy
// before the group (that kills any gdb still taking stacks and ends the hung workers not ended yet:
// hung_workers.hpp).
#pragma once

#include <boost/asio/io_context.hpp>
#include <boost/asio/steady_timer.hpp>
#include <chrono>
#include <cstdint>
#include <map>
#include <memory>
#include <optional>
#include <set>
#include <vector>

#include "launcher/hang/file_timer_server.hpp"
#include "launcher/hang/hang_settings.hpp"
#include "launcher/hang/hang_watch.hpp"
#include "launcher/hang/hung_workers.hpp"
#include "launcher/workers/child_reaper.hpp"
#include "launcher/workers/worker_group.hpp"

namespace ddp {

class HangMonitor {
 public:
  // `timers` may be null (no FIFO). Subscribes to it until destruction. `reaper`: the group's
  // (gdb runs under a guardian it watches).
  HangMonitor(boost::asio::io_context& io, ChildReaper& reaper, WorkerGroup& group,
              const HangSettings& settings, FileTimerServer* timers);
  ~HangMonitor();
  HangMonitor(const HangMonitor&) = delete;
  HangMonitor& operator=(const HangMonitor&) = delete;

  // The worker exited: it is no longer watched (stacks still being taken end with it). Call before
  // the group's failures are read. Non-blocking.
  void onWorkerExit(int localRank);
  // The worker's local rank runs a new process (replaced in place): watched from now, as at the
  // start of a generation. Non-blocking.
  void onWorkerReplaced(int localRank);

 private:
  using Clock = std::chrono::steady_clock;
  struct Sample {
    std::optional<uint64_t> cpu;  // clock ticks of the worker's tree
    uint64_t waitNs = 0;          // its threads' time runnable but waiting for a CPU
    uint64_t output = 0;
    Clock::time_point at;
  };
  void onRequest(const FileTimerRequest& request);
  std::optional<int> workerOf(pid_t pid);
  void sample(Clock::time_point now);
  void onTimer();
  void arm();

  WorkerGroup& group_;
  HangSettings settings_;
  FileTimerServer* timers_;
  HangWatch watch_;
  boost::asio::steady_timer timer_;
  std::chrono::milliseconds tick_;
  Clock::time_point nextSample_;
  std::vector<Sample> samples_;
  std::map<pid_t, int> senders_;  // request pid -> local rank (-1: none of ours)
  HungWorkers hung_;
  std::shared_ptr<int> alive_ = std::make_shared<int>(0);  // expires with the monitor
};

}  // namespace ddp
