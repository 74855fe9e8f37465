#include "launcher/hang/hung_workers.hpp"

#include <signal.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <algorithm>
#include <boost/asio/posix/stream_descriptor.hpp>
#include <boost/asio/steady_timer.hpp>

#include "launcher/workers/proc_info.hpp"
#include "rendezvous/base/logging.hpp"

namespace ddp {
namespace {

// Lines of a hung worker's stacks shown in the log and the failure summary (all in stacks.txt).
constexpr std::size_t kShownStackLines = 40;

}  // namespace

struct HungWorkers::Hung {
  uint64_t take = 0;
  HangVerdict verdict;
  int rank = 0;  // RANK, for the log lines
  bool collecting = true;   // its stacks are being taken
  bool pendingEnd = false;  // stacks taken; ended once no other hung worker's are being taken
  std::unique_ptr<boost::asio::posix::stream_descriptor> dumpWait;  // a Python dump: target's pidfd
  std::unique_ptr<boost::asio::steady_timer> dumpBound;
};

HungWorkers::HungWorkers(boost::asio::io_context& io, ChildReaper& reaper, WorkerGroup& group,
                         std::chrono::milliseconds stackBound)
    : io_(io),
      group_(group),
      bound_(stackBound),
      stacks_(std::make_unique<StackCollector>(io, reaper, stackBound)) {}

HungWorkers::~HungWorkers() {
  stacks_.reset();  // first: a worker under gdb's ptrace is not reported to its guardian
  for (const auto& [localRank, h] : hung_) {
    if (h->collecting || h->pendingEnd) group_.endHung(localRank);  // none left frozen
  }
}

void HungWorkers::take(const HangVerdict& v) {
  const auto watched = group_.watched();
  const auto worker = std::find_if(watched.begin(), watched.end(),
                                   [&](const auto& w) { return w.localRank == v.localRank; });
  if (worker == watched.end() || !group_.markHung(v)) return;
  auto& h = hung_[v.localRank];
  h = std::make_unique<Hung>();  // a replaced worker's record, if any, goes
  h->take = ++takes_;
  h->verdict = v;
  h->rank = worker->rank;
  const bool python = isPythonProcess(v.target);
  logger("agent")->warn("worker rank {} (local {}, pid {}) hangs: {}; taking the stacks of pid {} "
                        "({})", worker->rank, v.localRank, worker->pid, v.reason, v.target,
                        python ? "Python: SIGABRT, faulthandler prints them" : "gdb");
  if (!python) {
    // Frozen first: gdb reads symbols for seconds before it attaches, and a peer ended meanwhile
    // (on another node, say) would turn the wait in its stack into an exit.
    ::kill(v.target, SIGSTOP);
    stacks_->collectNative(v.target, [this, lr = v.localRank, take = h->take](
                                         const std::string& text) { finish(lr, take, text); });
    return;
  }
  group_.beginStderrCapture(v.localRank);
  if (abortForStacks(v.target)) {
    awaitPythonDump(v.localRank, *h);
  } else {
    finish(v.localRank, h->take, "no stacks: pid " + std::to_string(v.target) + " is gone\n");
  }
}

// The dump is complete when the aborted process is gone (its pidfd turns readable) or at the bound.
void HungWorkers::awaitPythonDump(int localRank, Hung& h) {
  const int pidfd = static_cast<int>(::syscall(SYS_pidfd_open, h.verdict.target, 0));
  h.dumpBound = std::make_unique<boost::asio::steady_timer>(io_, bound_);
  // A completion already queued runs even after its timer or descriptor is gone: `alive` and the
  // take's number tell.
  std::weak_ptr<int> alive = alive_;
  h.dumpBound->async_wait([this, localRank, take = h.take, alive](
                              const boost::system::error_code& ec) {
    if (ec || alive.expired() || !collecting(localRank, take)) return;
    finish(localRank, take,
           group_.endStderrCapture(localRank) + "(no complete dump within the bound)\n");
  });
  if (pidfd < 0) return;  // gone already, or no pidfds: the bound ends the wait
  h.dumpWait = std::make_unique<boost::asio::posix::stream_descriptor>(io_, pidfd);
  h.dumpWait->async_wait(boost::asio::posix::stream_descriptor::wait_read,
                         [this, localRank, take = h.take,
                          alive](const boost::system::error_code& ec) {
                           if (ec || alive.expired() || !collecting(localRank, take)) return;
                           finish(localRank, take, group_.endStderrCapture(localRank));
                         });
}

void HungWorkers::onExit(int localRank) {
  auto it = hung_.find(localRank);
  if (it == hung_.end() || !it->second->collecting) return;
  const Hung& h = *it->second;
  finish(localRank, h.take,
         group_.endStderrCapture(localRank) +
             (h.dumpBound ? "" : "(the worker exited while gdb was taking its stacks)\n"));
}

void HungWorkers::forget(int localRank) { hung_.erase(localRank); }

bool HungWorkers::collecting(int localRank, uint64_t take) const {
  auto it = hung_.find(localRank);
  return it != hung_.end() && it->second->take == take && it->second->collecting;
}

void HungWorkers::finish(int localRank, uint64_t take, const std::string& text) {
  if (!collecting(localRank, take)) return;
  Hung& h = *hung_.at(localRank);
  h.collecting = false;
  boost::system::error_code ignored;
  if (h.dumpBound) h.dumpBound->cancel();
  if (h.dumpWait) h.dumpWait->close(ignored);
  RecordedStacks r = recordStacks(group_.workerDir(localRank) + "/stacks.txt", h.verdict.reason,
                                  text, h.dumpBound != nullptr, kShownStackLines);
  logger("agent")->warn("stacks of worker rank {} (pid {}){}:\n{}", h.rank, h.verdict.target,
                        r.file.empty() ? "" : ", whole in " + r.file, r.shown);
  group_.setHungStacks(localRank, std::move(r));
  h.pendingEnd = true;
  endAll();
}

// Hung workers are ended together once every one's stacks are taken: ending one first would make
// the collectives of the others fail while gdb still reads their stacks.
void HungWorkers::endAll() {
  if (std::any_of(hung_.begin(), hung_.end(), [](const auto& h) { return h.second->collecting; })) {
    return;
  }
  for (auto& [localRank, h] : hung_) {
    if (!h->pendingEnd) continue;
    h->pendingEnd = false;
    group_.endHung(localRank);
  }
}

}  // namespace ddp
