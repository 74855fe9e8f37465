#include "rendezvous/detail/rendezvous_monitor.hpp"

#include <algorithm>
#include <climits>

#include "rendezvous/logging.hpp"

namespace ddp::detail {

namespace {

std::string ms(std::chrono::milliseconds d) { return std::to_string(d.count()) + " ms"; }

// Who `rank` watches: node rank 0 watches everyone, the others their successor (mod n).
std::vector<int> watchedBy(int rank, int n) {
  std::vector<int> ranks;
  if (n < 2) return ranks;
  if (rank == 0) {
    for (int r = 1; r < n; ++r) ranks.push_back(r);
  } else {
    ranks.push_back((rank + 1) % n);
  }
  return ranks;
}

}  // namespace

RoundMonitor::RoundMonitor(Store& store, const RendezvousSettings& settings)
    : store_(store),
      interval_(settings.keepAliveInterval),
      heartbeatTimeout_(effectiveHeartbeatTimeout(settings)),
      log_(logger("rdzv")),
      thread_([this] { run(); }) {}

RoundMonitor::~RoundMonitor() {
  {
    std::lock_guard<std::mutex> lock(mutex_);
    stop_ = true;
  }
  wake_.notify_all();
  thread_.join();
}

void RoundMonitor::enter(MonitoredRound round) {
  // The first tick comes after a random part of one interval, so that the agents of a large
  // round do not all heartbeat in the same instant (their counters start at "0", and observers
  // start each peer's silence clock at their own first look).
  std::uniform_int_distribution<int64_t> jitter(0, std::max<int64_t>(interval_.count() - 1, 0));
  {
    std::lock_guard<std::mutex> lock(mutex_);
    round_ = std::move(round);
    ++epoch_;
    nextTick_ = Clock::now() + std::chrono::milliseconds(jitter(random_));
  }
  wake_.notify_all();
}

void RoundMonitor::exit() {
  std::unique_lock<std::mutex> lock(mutex_);
  round_.reset();
  ++epoch_;
  // A tick of the old round may be in flight: wait for it (bounded, so a hung store cannot hold
  // the caller), so that its heartbeat cannot land after the caller deleted the round's keys.
  if (std::this_thread::get_id() == thread_.get_id()) return;
  wake_.wait_for(lock, heartbeatTimeout_, [this] { return !ticking_; });
}

void RoundMonitor::setCallback(Callback callback) {
  {
    std::lock_guard<std::recursive_mutex> lock(callbackMutex_);
    callback_ = std::move(callback);
  }
  // Deliver an event that happened before the callback was installed without waiting a tick.
  {
    std::lock_guard<std::mutex> lock(mutex_);
    kick_ = true;
  }
  wake_.notify_all();
}

void RoundMonitor::clearCallback() {
  std::lock_guard<std::recursive_mutex> lock(callbackMutex_);
  callback_ = nullptr;
}

void RoundMonitor::suppress(int64_t generation) {
  std::lock_guard<std::mutex> lock(mutex_);
  handledGeneration_ = std::max(handledGeneration_, generation);
}

void RoundMonitor::run() {
  std::unique_lock<std::mutex> lock(mutex_);
  while (!stop_) {
    if (!round_) {
      wake_.wait(lock, [this] { return stop_ || round_.has_value(); });
      continue;
    }
    if (!kick_ && Clock::now() < nextTick_) {
      const uint64_t waitedEpoch = epoch_;
      wake_.wait_until(lock, nextTick_,
                       [&] { return stop_ || kick_ || epoch_ != waitedEpoch; });
      continue;
    }
    kick_ = false;
    const MonitoredRound round = *round_;
    const uint64_t epoch = epoch_;
    ticking_ = true;
    lock.unlock();
    tick(round, epoch);
    lock.lock();
    ticking_ = false;
    wake_.notify_all();
    if (epoch == epoch_) nextTick_ = Clock::now() + interval_;
  }
}

void RoundMonitor::tick(const MonitoredRound& round, uint64_t epoch) {
  const auto now = Clock::now();
  if (epoch != tickEpoch_) {
    tickEpoch_ = epoch;
    lastOk_ = now;
    failing_ = false;
    watched_.clear();
    for (int rank : watchedBy(round.rank, static_cast<int>(round.hosts.size()))) {
      watched_.push_back(Watched{rank, "", now});
    }
  }
  try {
    // The end first: a round whose keys were deleted (this node was away) has no heartbeat keys
    // left to bump or to watch. An ended round is still heartbeated: the next round waits for
    // members that are still stopping their workers.
    const auto end = readRoundEnd(store_, round.keys, round.generation);
    if (!end || !end->removed) store_.add(round.keys.heartbeat(round.generation, round.rank), 1);
    if (end) {
      deliver({end->kind, round.generation, end->detail, end->lostRank}, epoch);
    } else {
      watchPeers(round);
    }
    lastOk_ = Clock::now();
    failing_ = false;
  } catch (const std::exception& e) {
    const auto silent = std::chrono::duration_cast<std::chrono::milliseconds>(now - lastOk_);
    if (!failing_) {  // one warning per outage, not one per tick
      log_->warn("rendezvous store call failed during heartbeat of round {}: {}",
                 round.generation, e.what());
    }
    failing_ = true;
    if (silent >= heartbeatTimeout_) {
      deliver({RendezvousEventKind::kStoreLost, round.generation,
               "the rendezvous store has not answered for " + ms(silent) +
                   " (heartbeat_timeout " + ms(heartbeatTimeout_) + "): " + e.what()},
              epoch);
    }
  }
}

void RoundMonitor::watchPeers(const MonitoredRound& round) {
  if (watched_.empty()) return;
  std::vector<std::string> names;
  for (const auto& peer : watched_) names.push_back(round.keys.heartbeat(round.generation, peer.rank));
  const auto values = store_.multiGet(names);
  const auto now = Clock::now();
  const Watched* lost = nullptr;
  for (size_t i = 0; i < watched_.size(); ++i) {
    Watched& peer = watched_[i];
    if (values[i] != peer.value) {
      peer.value = values[i];
      peer.changedAt = now;
    } else if (now - peer.changedAt >= heartbeatTimeout_ && lost == nullptr) {
      lost = &peer;
    }
  }
  if (lost == nullptr || store_.check({round.keys.exitDone(round.generation)})) return;
  const auto silent = std::chrono::duration_cast<std::chrono::milliseconds>(now - lost->changedAt);
  const std::string detail = "node rank " + std::to_string(lost->rank) + " (" +
                             round.hosts[lost->rank] + ") sent no heartbeat for " + ms(silent) +
                             " (heartbeat_timeout " + ms(heartbeatTimeout_) + "), seen by node rank " +
                             std::to_string(round.rank);
  endRound(store_, round.keys, round.generation,
           {RendezvousEventKind::kPeerLost, detail, lost->rank});
}

void RoundMonitor::deliver(const RendezvousEvent& event, uint64_t epoch) {
  std::lock_guard<std::recursive_mutex> callbackLock(callbackMutex_);
  if (!callback_) return;  // delivered on a later tick, once somebody watches
  {
    std::lock_guard<std::mutex> lock(mutex_);
    if (epoch != epoch_ || event.generation <= handledGeneration_) return;
    handledGeneration_ = event.generation;
  }
  log_->info("rendezvous round {} ended: {}", event.generation, event.detail);
  const Callback callback = callback_;  // the callback may replace or clear callback_
  callback(event);
}

}  // namespace ddp::detail
