// WorkerGroup's side of hang detection (worker_group.hpp: takeHung): a hung worker's failure number,
// its stacks (stack_collector.hpp), then its end — together with the other hung workers.
#include "launcher/workers/worker_group.hpp"

#include <signal.h>
#include <sys/syscall.h>

#include <algorithm>

#include "launcher/workers/detail/group_worker.hpp"
#include "launcher/workers/proc_info.hpp"
#include "launcher/workers/stack_collector.hpp"
#include "rendezvous/base/logging.hpp"

namespace ddp {
namespace {

// Lines of a hung worker's stacks shown in the log and the failure summary (all in stacks.txt).
constexpr std::size_t kShownStackLines = 40;

}  // namespace

std::vector<WorkerGroup::Watched> WorkerGroup::watched() const {
  std::vector<Watched> out;
  for (const auto& w : workers_) {
    out.push_back({w->spec.localRank, w->pid, w->exited, w->out->bytesRead() + w->err->bytesRead()});
  }
  return out;
}

void WorkerGroup::takeHung(const HangVerdict& v) {
  auto it = std::find_if(workers_.begin(), workers_.end(),
                         [&](const auto& w) { return w->spec.localRank == v.localRank; });
  if (it == workers_.end() || (*it)->exited || (*it)->hang) return;
  Worker& w = **it;
  w.hang = v;
  w.failureSeq = takeFailureNumber();
  w.collecting = true;
  const bool python = isPythonProcess(v.target);
  logger("agent")->warn("worker rank {} (local {}, pid {}) hangs: {}; taking the stacks of pid {} "
                        "({})", w.spec.rank, w.spec.localRank, w.pid, v.reason, v.target,
                        python ? "Python: SIGABRT, faulthandler prints them" : "gdb");
  if (!python) {
    // Frozen first: gdb reads symbols for seconds before it attaches, and a peer ended meanwhile
    // (on another node, say) would turn the wait in its stack into an exit.
    ::kill(v.target, SIGSTOP);
    stacks_->collectNative(v.target, [this, &w](const std::string& text) { finishHang(w, text); });
    return;
  }
  w.err->beginCapture();
  if (abortForStacks(v.target)) {
    awaitPythonDump(w);
  } else {
    finishHang(w, "no stacks: pid " + std::to_string(v.target) + " is gone\n");
  }
}

// The dump is complete when the aborted process is gone (its pidfd turns readable), or at the bound.
void WorkerGroup::awaitPythonDump(Worker& w) {
  const int pidfd = static_cast<int>(::syscall(SYS_pidfd_open, w.hang->target, 0));
  w.dumpBound = std::make_unique<boost::asio::steady_timer>(io_, settings_.stackBound);
  // A completion already queued runs even after its timer or descriptor is gone: `alive` tells.
  std::weak_ptr<int> alive = alive_;
  w.dumpBound->async_wait([this, &w, alive](const boost::system::error_code& ec) {
    if (!ec && !alive.expired()) {
      finishHang(w, w.err->endCapture() + "(no complete dump within the bound)\n");
    }
  });
  if (pidfd < 0) return;  // gone already, or no pidfds: the bound ends the wait
  w.dumpWait = std::make_unique<boost::asio::posix::stream_descriptor>(io_, pidfd);
  w.dumpWait->async_wait(boost::asio::posix::stream_descriptor::wait_read,
                         [this, &w, alive](const boost::system::error_code& ec) {
                           if (!ec && !alive.expired()) finishHang(w, w.err->endCapture());
                         });
}

void WorkerGroup::finishHang(Worker& w, const std::string& text) {
  if (!w.collecting) return;
  w.collecting = false;
  boost::system::error_code ignored;
  if (w.dumpBound) w.dumpBound->cancel();
  if (w.dumpWait) w.dumpWait->close(ignored);
  const RecordedStacks r =
      recordStacks(logs_.workerDir(generation_, w.spec.localRank) + "/stacks.txt", w.hang->reason,
                   text, w.dumpBound != nullptr, kShownStackLines);
  w.stacks = r.shown;
  w.stacksFile = r.file;
  w.waitsForPeer = r.waitsForPeer;
  logger("agent")->warn("stacks of worker rank {} (pid {}){}:\n{}", w.spec.rank,
                        w.hang->target, w.stacksFile.empty() ? "" : ", whole in " + w.stacksFile,
                        w.stacks);
  w.pendingEnd = true;
  endHungWorkers();
}

// Hung workers are ended together once every one's stacks are taken: ending one first would make
// the collectives of the others fail while gdb still reads their stacks.
void WorkerGroup::endHungWorkers() {
  if (std::any_of(workers_.begin(), workers_.end(), [](const auto& w) { return w->collecting; })) {
    return;
  }
  for (auto& w : workers_) {
    if (!w->pendingEnd) continue;
    w->pendingEnd = false;
    if (w->exited) continue;
    if (w->hang->signal == 0) {
      signalWorker(w->pid, SIGKILL);
    } else {
      ::kill(w->hang->target, w->hang->signal);  // the timer's signal to its process, as torch
      ::kill(w->hang->target, SIGCONT);           // it was frozen for gdb
    }
  }
}

}  // namespace ddp
