// StackCollector: takes the stacks of a hung worker before ddprun ends it.
//
//   * A native process: `gdb -batch -ex 'thread apply all bt' -p PID`, run like a worker (under a
//     guardian, so it cannot outlive ddprun) with its output read on the io_context; bounded by
//     `bound` (then gdb is killed and what it printed so far is kept). gdb detaches when it is done,
//     leaving the process as it was. Without gdb on PATH the text says so (Debian package gdb).
//   * A Python process: abortForStacks() — SIGABRT, with core dumps off for that process. Workers
//     of a job with hang detection run with PYTHONFAULTHANDLER=1, so Python prints every thread's
//     traceback to the worker's stderr (which ddprun captures) and dies of SIGABRT.
//
// Thread safety: use from the io_context's thread only; the thread must be the one that spawns the
// workers (gdb's guardian follows it, worker_process.hpp). The destructor kills and reaps any gdb
// still running (blocks for milliseconds).
#pragma once

#include <sys/types.h>

#include <boost/asio/io_context.hpp>
#include <chrono>
#include <functional>
#include <map>
#include <memory>
#include <string>

#include "launcher/workers/child_reaper.hpp"
#include "launcher/workers/hang_verdict.hpp"

namespace ddp {

class StackCollector {
 public:
  using Done = std::function<void(const std::string& stacks)>;

  StackCollector(boost::asio::io_context& io, ChildReaper& reaper, std::chrono::milliseconds bound);
  ~StackCollector();
  StackCollector(const StackCollector&) = delete;
  StackCollector& operator=(const StackCollector&) = delete;

  // Runs gdb on `pid`; `done` gets the cleaned stacks (stack_text.hpp) on the io_context when gdb
  // exits or was stopped at the bound — or, at once, a line saying why there are none. Never
  // throws; never blocks.
  void collectNative(pid_t pid, Done done);

  std::size_t running() const { return jobs_.size(); }

 private:
  struct Job;
  void finish(pid_t guardian);

  boost::asio::io_context& io_;
  ChildReaper& reaper_;
  std::chrono::milliseconds bound_;
  std::map<pid_t, std::unique_ptr<Job>> jobs_;  // by gdb's guardian pid
  std::shared_ptr<int> alive_ = std::make_shared<int>(0);  // expires with the collector
};

// Writes `stacks` whole to `path` (a first line "# <reason>"), and returns what to show: a Python
// dump without its noise (`pythonDump`), trimmed to `shownLines`. Blocks for the write only;
// never throws (a failed write leaves `file` empty).
RecordedStacks recordStacks(const std::string& path, const std::string& reason,
                            const std::string& stacks, bool pythonDump, std::size_t shownLines);

// Sends SIGABRT to `pid` after setting its core-size limit to 0 (a dump nobody asked for). Returns
// false when the process is gone. Non-blocking.
bool abortForStacks(pid_t pid);

}  // namespace ddp
