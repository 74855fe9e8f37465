#include "rendezvous/algorithm/detail/rendezvous_monitor.hpp"

#include <algorithm>
#include <climits>

#include "rendezvous/algorithm/detail/rendezvous_text.hpp"
#include "rendezvous/base/logging.hpp"

namespace ddp::detail {

namespace {

// The least a store call is given, even when heartbeatTimeout is nearly used up.
constexpr std::chrono::milliseconds kMinCallBudget{50};
// The most clearing ON_CLOSE may take when leaving a round (the destructor waits for it).
constexpr std::chrono::milliseconds kMaxDisarmBudget{1000};


// A seed for the heartbeat jitter that differs between the agents of one process and between
// processes, without opening a random device per agent.
uint64_t jitterSeed(const void* self) {
  const auto now = static_cast<uint64_t>(Clock::now().time_since_epoch().count());
  return now ^ (reinterpret_cast<uintptr_t>(self) * 0x9E3779B97F4A7C15ull);
}

}  // namespace

RoundMonitor::RoundMonitor(Store& store, StoreConnector connect,
                           const RendezvousSettings& settings)
    : interval_(settings.keepAliveInterval),
      heartbeatTimeout_(effectiveHeartbeatTimeout(settings)),
      log_(logger("rdzv")),
      random_(static_cast<std::minstd_rand::result_type>(jitterSeed(this))),
      link_(store, std::move(connect)) {}

RoundMonitor::~RoundMonitor() {
  {
    std::lock_guard<std::mutex> lock(mutex_);
    stop_ = true;
  }
  wake_.notify_all();
  interrupt();
  if (thread_.joinable()) thread_.join();
}

void RoundMonitor::interrupt() { link_.interrupt(); }

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
    if (!thread_.joinable()) thread_ = std::thread([this] { run(); });
  }
  wake_.notify_all();
  interrupt();
}

void RoundMonitor::exit() {
  std::unique_lock<std::mutex> lock(mutex_);
  round_.reset();
  ++epoch_;
  wake_.notify_all();
  interrupt();  // clear ON_CLOSE now, not after the current wait
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
  interrupt();
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
  while (true) {
    // Registrations of a round this node no longer monitors are cleared first, also on the way
    // out: a monitor destroyed after exit() must not make this node look dead.
    if (armed_ && (!round_ || armed_->epoch != epoch_)) {
      lock.unlock();
      disarm();
      lock.lock();
      continue;
    }
    if (stop_) return;
    if (!round_) {
      wake_.wait(lock, [this] { return stop_ || round_.has_value(); });
      continue;
    }
    const MonitoredRound round = *round_;
    const uint64_t epoch = epoch_;
    const Clock::time_point next = nextTick_;
    const bool tickNow = preparedEpoch_ == epoch && (kick_ || Clock::now() >= next);
    if (tickNow) kick_ = false;
    ticking_ = tickNow;
    lock.unlock();
    if (preparedEpoch_ != epoch) {
      prepare(round, epoch);
    } else if (tickNow) {
      const auto started = Clock::now();
      const bool ok = tick(round, epoch);
      const auto now = Clock::now();
      const auto reportAt = lastOk_ + heartbeatTimeout_;
      // After a failure, try again soon enough to report the loss at reportAt, not later.
      const auto retryAt = now >= reportAt ? now + interval_
                                           : std::max(now + kMinCallBudget,
                                                      std::min(now + interval_, reportAt));
      lock.lock();
      ticking_ = false;
      wake_.notify_all();
      if (epoch == epoch_) nextTick_ = ok ? started + interval_ : retryAt;
      continue;
    } else if (link_.canWait() && endSeenEpoch_ != epoch) {
      awaitEnd(round, epoch, next);
    } else {
      lock.lock();
      wake_.wait_until(lock, next, [&] { return stop_ || kick_ || epoch_ != epoch; });
      continue;
    }
    lock.lock();
  }
}

void RoundMonitor::prepare(const MonitoredRound& round, uint64_t epoch) {
  preparedEpoch_ = epoch;
  lastOk_ = Clock::now();
  failing_ = false;
  watched_.clear();
  for (const auto& peer : round.watched) {
    watched_.push_back(Watched{peer.rank, peer.host, "", lastOk_});
  }
  // Connect and arm ON_CLOSE at once: an agent that dies before its first tick is noticed too.
  try {
    link_.use(callBudget(lastOk_));
    arm(round, epoch);
  } catch (const std::exception& e) {
    log_->debug("heartbeat connection for round {} not ready: {}", round.generation, e.what());
    dropConnection();  // the ticks try again and report a lasting failure
  }
}

bool RoundMonitor::tick(const MonitoredRound& round, uint64_t epoch) {
  try {
    Store& store = link_.use(callBudget(Clock::now()));
    // The end first: a round whose keys were deleted (this node was away) has no heartbeat keys
    // left to bump or to watch. An ended round is still heartbeated: the next round waits for
    // members that are still stopping their workers.
    const auto end = readRoundEnd(store, round.keys, round.generation);
    if (!end || !end->removed) store.add(round.keys.heartbeat(round.generation, round.rank), 1);
    if (end) {
      handleEnd(store, round, epoch, *end);
    } else {
      watchPeers(store, round);
      arm(round, epoch);  // again after a reconnect
    }
    lastOk_ = Clock::now();
    failing_ = false;
    return true;
  } catch (const std::exception& e) {
    storeFailed(round, epoch, e);
    return false;
  }
}

void RoundMonitor::awaitEnd(const MonitoredRound& round, uint64_t epoch, Clock::time_point until) {
  const auto left = remaining(until);
  if (left.count() <= 0) return;
  try {
    // The budget bounds the CANCEL_WAIT that ends a wait without the key.
    Store& store = link_.use(callBudget(until));
    store.wait({round.keys.end(round.generation)}, left);
    checkEnd(store, round, epoch);
  } catch (const TimeoutError&) {
    // Nothing ended before the next tick, or the wait was interrupted.
  } catch (const std::exception& e) {
    log_->debug("waiting for the end of round {} failed: {}", round.generation, e.what());
    dropConnection();  // the next tick opens a new connection and counts the failure
  }
}

void RoundMonitor::storeFailed(const MonitoredRound& round, uint64_t epoch,
                               const std::exception& e) {
  dropConnection();
  const auto silent = std::chrono::duration_cast<std::chrono::milliseconds>(Clock::now() - lastOk_);
  if (!failing_) {  // one warning per outage, not one per tick
    log_->warn("rendezvous store call failed during heartbeat of round {}: {}", round.generation,
               e.what());
  }
  failing_ = true;
  if (silent >= heartbeatTimeout_) {
    deliver({RendezvousEventKind::kStoreLost, round.generation,
             "the rendezvous store has not answered for " + msText(silent) + " (heartbeat_timeout " +
                 msText(heartbeatTimeout_) + "): " + e.what()},
            epoch);
  }
}

std::chrono::milliseconds RoundMonitor::callBudget(Clock::time_point at) const {
  // While the store answers, a call gets a whole interval: after this process itself was stopped
  // or starved past lastOk + heartbeatTimeout, the store still deserves a fair chance.
  if (!failing_) return interval_;
  const auto left = std::chrono::ceil<std::chrono::milliseconds>(lastOk_ + heartbeatTimeout_ - at);
  return std::max(kMinCallBudget, std::min(interval_, left));
}

void RoundMonitor::arm(const MonitoredRound& round, uint64_t epoch) {
  if (!link_.onCloseSupported() || (armed_ && armed_->epoch == epoch)) return;
  const int64_t g = round.generation;
  const std::string lost = encodeRoundEnd(
      {RendezvousEventKind::kPeerLost,
       "node rank " + std::to_string(round.rank) + " (" + round.host +
           ") lost its connection to the rendezvous store (agent died?)",
       round.rank});
  Armed armed{epoch, {round.keys.end(g), round.keys.round()}};
  link_.hooks().armOnClose(armed.keys[0], "", lost);
  link_.hooks().armOnClose(armed.keys[1], std::to_string(g), std::to_string(g + 1));
  armed_ = std::move(armed);
}

void RoundMonitor::disarm() {
  try {
    if (link_.onCloseSupported()) {
      link_.use(std::min(interval_, kMaxDisarmBudget));
      link_.hooks().clearOnClose(armed_->keys);
    }
    armed_.reset();
  } catch (const std::exception& e) {
    log_->debug("clearing the heartbeat connection's ON_CLOSE failed: {}", e.what());
    dropConnection();
  }
}

void RoundMonitor::dropConnection() {
  link_.drop();
  armed_.reset();  // registrations live and die with their connection
}

void RoundMonitor::watchPeers(Store& store, const MonitoredRound& round) {
  if (watched_.empty()) return;
  std::vector<std::string> names;
  for (const auto& peer : watched_) {
    names.push_back(round.keys.heartbeat(round.generation, peer.rank));
  }
  const auto values = store.multiGet(names);
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
  if (lost == nullptr || store.check({round.keys.exitDone(round.generation)})) return;
  const auto silent = std::chrono::duration_cast<std::chrono::milliseconds>(now - lost->changedAt);
  const std::string detail = "node rank " + std::to_string(lost->rank) + " (" + lost->host +
                             ") sent no heartbeat for " + msText(silent) +
                             " (heartbeat_timeout " + msText(heartbeatTimeout_) + "), seen by node rank " +
                             std::to_string(round.rank);
  endRound(store, round.keys, round.generation,
           {RendezvousEventKind::kPeerLost, detail, lost->rank});
}

void RoundMonitor::checkEnd(Store& store, const MonitoredRound& round, uint64_t epoch) {
  if (const auto end = readRoundEnd(store, round.keys, round.generation)) {
    handleEnd(store, round, epoch, *end);
  }
}

void RoundMonitor::handleEnd(Store& store, const MonitoredRound& round, uint64_t epoch,
                             const RoundEnd& end) {
  const int64_t g = round.generation;
  endSeenEpoch_ = epoch;
  // An agent that died after every node passed the exit barrier changes nothing.
  if (end.kind == RendezvousEventKind::kPeerLost && !end.removed &&
      store.check({round.keys.exitDone(g)})) {
    return;
  }
  deliver({end.kind, g, end.detail, end.lostRank, end.removed}, epoch);
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
