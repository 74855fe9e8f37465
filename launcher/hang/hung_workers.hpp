// HungWorkers: what follows a hang verdict (hang_watch.hpp) for one generation — the hung
// worker's stacks, then its end, together with every other hung worker.
//
//   take(verdict): the group marks the worker hung (WorkerGroup::markHung: its failure is numbered
//     now, so hung workers keep the order of the verdicts; stop signals other than SIGKILL are kept
//     away from it until it is ended). Then the stacks of verdict.target are taken
//     (stack_collector.hpp): a native process is frozen with SIGSTOP and read by gdb; a Python
//     process gets SIGABRT, and its faulthandler dump is the worker's stderr captured until the
//     process is gone (its pidfd turns readable), the worker is reaped, or the stack bound passes.
//     The stacks are written whole to <worker dir>/stacks.txt, logged trimmed, and given to the
//     group for the worker's failure (WorkerGroup::setHungStacks).
//   Once no hung worker's stacks are still being taken, every hung worker is ended
//     (WorkerGroup::endHung: SIGKILL to its process group, or the timer's signal to the timer's
//     process): ending one first would make the collectives of the others fail while gdb still
//     reads their stacks.
//
// Thread safety: use from the io_context's thread only, the one that spawns the workers (gdb runs
// under a guardian that follows it). Construct after the group started; destroy before the group:
// the destructor kills and reaps any gdb still running (blocks for milliseconds; a worker under
// gdb's ptrace would not be reported to its guardian) and ends every hung worker not ended yet, so
// none is left frozen. Completions already queued then do nothing.
#pragma once

#include <boost/asio/io_context.hpp>
#include <chrono>
#include <cstdint>
#include <map>
#include <memory>
#include <string>

#include "launcher/hang/stack_collector.hpp"
#include "launcher/workers/child_reaper.hpp"
#include "launcher/workers/hang_verdict.hpp"
#include "launcher/workers/worker_group.hpp"

namespace ddp {

class HungWorkers {
 public:
  // `stackBound`: how long taking one worker's stacks (gdb, or a Python dump) may take before it is
  // ended anyway (HangSettings::stackBound).
  HungWorkers(boost::asio::io_context& io, ChildReaper& reaper, WorkerGroup& group,
              std::chrono::milliseconds stackBound);
  ~HungWorkers();
  HungWorkers(const HungWorkers&) = delete;
  HungWorkers& operator=(const HungWorkers&) = delete;

  // Takes the verdict's worker as hung (see above); a worker that exited or is already hung is left
  // alone. Non-blocking (the failure number may block up to 1 s, as when reaping).
  void take(const HangVerdict& verdict);
  // The worker exited: stacks still being taken end with what was found (a Python dump ends with
  // its worker; gdb's is cut). Call before the group's failures are read. Non-blocking.
  void onExit(int localRank);
  // The local rank runs a new process (replaced in place): what was kept for the old one goes,
  // and completions still due for it do nothing. Non-blocking.
  void forget(int localRank);

 private:
  struct Hung;
  void awaitPythonDump(int localRank, Hung& hung);
  bool collecting(int localRank, uint64_t take) const;
  void finish(int localRank, uint64_t take, const std::string& stacks);
  void endAll();

  boost::asio::io_context& io_;
  WorkerGroup& group_;
  std::chrono::milliseconds bound_;
  std::map<int, std::unique_ptr<Hung>> hung_;  // by local rank
  uint64_t takes_ = 0;                         // numbers each take: completions name theirs
  std::shared_ptr<int> alive_ = std::make_shared<int>(0);  // expires with this object
  std::unique_ptr<StackCollector> stacks_;  // reset first by the destructor (kills gdb)
};

}  // namespace ddp
