#include "launcher/hang/hang_monitor.hpp"

#include <unistd.h>

#include <algorithm>

#include "launcher/workers/proc_info.hpp"
#include "rendezvous/base/logging.hpp"

namespace ddp {
namespace {

double unixNow() {
  return std::chrono::duration<double>(std::chrono::system_clock::now().time_since_epoch()).count();
}

std::vector<pid_t> pidsOf(const std::vector<WorkerGroup::Watched>& workers) {
  std::vector<pid_t> pids;
  for (const auto& w : workers) pids.push_back(w.pid);
  return pids;
}

}  // namespace

HangMonitor::HangMonitor(boost::asio::io_context& io, ChildReaper& reaper, WorkerGroup& group,
                         const HangSettings& settings, FileTimerServer* timers)
    : group_(group),
      settings_(settings),
      timers_(timers),
      watch_(settings.timeout, pidsOf(group.watched()), Clock::now()),
      timer_(io),
      tick_(std::clamp<std::chrono::milliseconds>(settings.timeout / 4, std::chrono::milliseconds(100),
                                                  std::chrono::seconds(1))),
      hung_(io, reaper, group, settings.stackBound) {
  samples_.resize(watch_.size());
  if (settings_.stragglers) settings_.stragglers->startGeneration(int(watch_.size()));
  const auto now = Clock::now();
  sample(now);  // the baseline
  nextSample_ = now + tick_;
  if (timers_) timers_->setHandler([this](const FileTimerRequest& r) { onRequest(r); });
  arm();
}

HangMonitor::~HangMonitor() {
  if (timers_) timers_->setHandler(nullptr);
  timer_.cancel();
}

void HangMonitor::onWorkerExit(int localRank) {
  hung_.onExit(localRank);
  if (localRank < 0 || static_cast<std::size_t>(localRank) >= watch_.size()) return;
  watch_.exited(localRank);
  if (settings_.stragglers) settings_.stragglers->forget(localRank);
}

void HangMonitor::onWorkerReplaced(int localRank) {
  if (localRank < 0 || static_cast<std::size_t>(localRank) >= watch_.size()) return;
  for (const auto& w : group_.watched()) {
    if (w.localRank != localRank) continue;
    const auto now = Clock::now();
    hung_.forget(localRank);
    watch_.restarted(localRank, w.pid, now);
    if (settings_.stragglers) settings_.stragglers->forget(localRank);
    samples_[std::size_t(localRank)] = Sample{};
    std::erase_if(senders_, [&](const auto& s) { return s.second == localRank; });
    arm();  // its baseline sample is taken at the next tick
  }
}

// The local rank whose worker sent a request from `pid`; remembered per pid for the generation.
std::optional<int> HangMonitor::workerOf(pid_t pid) {
  auto known = senders_.find(pid);
  if (known != senders_.end()) {
    return known->second < 0 ? std::nullopt : std::optional<int>(known->second);
  }
  int found = -1;
  for (const auto& w : group_.watched()) {
    if (!w.exited && belongsToWorker(pid, w.pid)) {
      found = w.localRank;
      break;
    }
  }
  senders_[pid] = found;
  if (found < 0) {
    logger("agent")->warn("a request on the worker timer FIFO came from pid {}, which is no worker "
                          "of this node nor below one; its requests are ignored", pid);
    return std::nullopt;
  }
  return found;
}

void HangMonitor::onRequest(const FileTimerRequest& r) {
  const auto lr = workerOf(r.pid);
  if (!lr) return;
  const auto now = Clock::now();
  if (r.isProgress()) {
    if (settings_.stragglers && r.computeSeconds) settings_.stragglers->beat(*lr, *r.computeSeconds, now);
    watch_.beat(*lr, r.step, now);
    return;  // a later deadline: the armed timer re-arms itself when it fires
  }
  watch_.activity(*lr, now);
  if (r.isRelease()) {
    watch_.release(*lr, r.pid, r.scopeId);
  } else {
    watch_.acquire(*lr, r.pid, r.scopeId, r.expirationTime, r.signal);
    arm();  // the new deadline may be the nearest one
  }
}

// A worker whose CPU time grew by less than this share of one core between samples is idle:
// Python and torch keep a few background threads that wake now and then (a clock tick every
// second or two), which must not count as progress.
constexpr double kBusyShare = 0.1;
// A worker whose threads waited for a CPU at least this share of the time is starved, not hung (a
// torch import behind 20 runnable processes on 2 cores gets under a tenth of a core). Blocked
// workers' threads also wait after each wake-up: up to a tenth of the time measured at load 23.
constexpr double kStarvedShare = 0.5;

void HangMonitor::sample(Clock::time_point now) {
  static const double ticksPerSecond = static_cast<double>(::sysconf(_SC_CLK_TCK));
  for (const auto& w : group_.watched()) {
    const auto lr = static_cast<std::size_t>(w.localRank);
    if (lr >= samples_.size() || !watch_.needsSampling(w.localRank)) continue;
    Sample next{treeCpuTicks(w.pid), treeRunDelayNs(w.pid), w.outputBytes, now};
    Sample& last = samples_[lr];
    if (last.cpu) {  // else the first sample: a baseline
      const double wall = std::chrono::duration<double>(now - last.at).count();
      const double cpu = next.cpu ? double(*next.cpu - std::min(*next.cpu, *last.cpu)) / ticksPerSecond : 0;
      const double waited = double(next.waitNs - std::min(next.waitNs, last.waitNs)) / 1e9;
      const bool busy = cpu >= kBusyShare * wall || waited >= kStarvedShare * wall;
      if (next.output != last.output || busy) watch_.activity(w.localRank, now);
    }
    last = next;
  }
}

void HangMonitor::onTimer() {
  const auto now = Clock::now();
  if (now >= nextSample_) {
    sample(now);
    nextSample_ = now + tick_;
  }
  HangCheck due = watch_.check(now, unixNow());
  auto log = logger("agent");
  for (const auto& note : due.notes) log->info("{}", note);
  if (!due.hangs.empty() && group_.stopping()) {
    log->debug("{} worker(s) fell silent while the group was being stopped; not taken as hung",
               due.hangs.size());
  } else {
    for (const auto& verdict : due.hangs) hung_.take(verdict);
  }
  arm();
}

void HangMonitor::arm() {
  const auto now = Clock::now();
  std::optional<Clock::time_point> next = watch_.nextDeadline(now, unixNow());
  bool sampling = false;
  for (std::size_t lr = 0; lr < watch_.size(); ++lr) sampling = sampling || watch_.needsSampling(int(lr));
  if (sampling && (!next || nextSample_ < *next)) next = nextSample_;
  timer_.cancel();
  if (!next) return;
  timer_.expires_at(*next);
  // A completion already queued runs even after the timer is gone: `alive` tells.
  timer_.async_wait([this, alive = std::weak_ptr<int>(alive_)](const boost::system::error_code& ec) {
    if (!ec && !alive.expired()) onTimer();
  });
}

}  // namespace ddp
