#include "rendezvous/algorithm/detail/rendezvous_monitor.hpp"

#include <algorithm>
#include <climits>
#include <utility>

#include "rendezvous/algorithm/detail/rendezvous_text.hpp"
#include "rendezvous/base/error.hpp"
#include "rendezvous/base/logging.hpp"

namespace ddp::detail {

namespace {

// The least a store call is given, even when heartbeatTimeout is nearly used up.
constexpr std::chrono::milliseconds kMinCallBudget{50};
// The pause before a failed call is tried again (a refused connection retries within its own
// connect budget, so this never spins).
constexpr std::chrono::milliseconds kRetryAfter{50};
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
      probeEvery_(std::clamp<std::chrono::milliseconds>(heartbeatTimeout_ / 6, kMinCallBudget,
                                                        std::max(interval_, kMinCallBudget))),
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
      lock.lock();
      ticking_ = false;
      wake_.notify_all();
      // After a failure, beat again as soon as the store answers: the next attempt follows at
      // once, and it is in flight when a stalled store wakes up.
      if (epoch == epoch_) nextTick_ = ok ? started + interval_ : Clock::now() + kRetryAfter;
      continue;
    } else if (link_.canWait() && endSeenEpoch_ != epoch) {
      const bool ok = awaitEnd(round, epoch, next);
      lock.lock();
      if (!ok && epoch == epoch_) nextTick_ = std::min(nextTick_, Clock::now() + kRetryAfter);
      continue;
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
  const auto now = Clock::now();
  unansweredSince_.reset();
  restartClocks_ = false;
  overloaded_ = false;
  watched_.clear();
  for (const auto& peer : round.watched) {
    watched_.push_back(Watched{peer.rank, peer.host, peer.slot, "", now, false});
  }
  // Connect and arm ON_CLOSE at once: an agent that dies before its first tick is noticed too;
  // and, on a connection of its own (its calls have budgets), look at the peers once: one that
  // died while the round formed ends it at once.
  try {
    Store& store = link_.use(callBudget(now));
    arm(round, epoch);
    if (link_.ownsConnection() && !readRoundEnd(store, round.keys, round.generation)) {
      watchPeers(store, round);
    }
  } catch (const std::exception& e) {
    log_->debug("heartbeat connection for round {} not ready: {}", round.generation, e.what());
    dropConnection();  // the ticks try again and report a lasting failure
  }
}

bool RoundMonitor::tick(const MonitoredRound& round, uint64_t epoch) {
  const auto sentAt = Clock::now();
  const auto budget = callBudget(sentAt);
  try {
    Store& store = link_.use(budget);
    // The end first: a round whose keys were deleted (this node was away) has no heartbeat keys
    // left to bump or to watch. An ended round is still heartbeated: the next round waits for
    // members that are still stopping their workers.
    const auto end = readRoundEnd(store, round.keys, round.generation);
    // ON_CLOSE again after a reconnect, before the beat: a counter past kNoHeartbeatYet tells the
    // watchers that this node's death ends the round by itself.
    if (!end) arm(round, epoch);
    if (!end || !end->removed) store.add(round.keys.heartbeat(round.generation, round.rank), 1);
    if (end) {
      handleEnd(store, round, epoch, *end);
    } else {
      watchPeers(store, round);
    }
    storeAnswered(round);
    return true;
  } catch (const std::exception& e) {
    storeFailed(round, epoch, e, sentAt, budget);
    return false;
  }
}

bool RoundMonitor::awaitEnd(const MonitoredRound& round, uint64_t epoch, Clock::time_point until) {
  // One slice: its CANCEL_WAIT is a request the store must answer, so a stall shows within
  // probeEvery_ even between ticks.
  const auto sliceEnd = std::min(until, Clock::now() + probeEvery_);
  const auto left = remaining(sliceEnd);
  if (left.count() <= 0) return true;
  // The budget bounds the CANCEL_WAIT that ends a wait without the key.
  const auto budget = callBudget(sliceEnd);
  try {
    Store& store = link_.use(budget);
    store.wait({round.keys.end(round.generation)}, left);
    checkEnd(store, round, epoch);
  } catch (const TimeoutError& e) {
    // Nothing ended within the slice, or the wait was interrupted; its CANCEL_WAIT answered or not.
    if (!link_.usable()) {
      storeFailed(round, epoch, e, sliceEnd, budget);
      return false;
    }
  } catch (const std::exception& e) {
    log_->debug("waiting for the end of round {} failed: {}", round.generation, e.what());
    storeFailed(round, epoch, e, Clock::now(), budget);
    return false;
  }
  storeAnswered(round);
  return true;
}

void RoundMonitor::storeFailed(const MonitoredRound& round, uint64_t epoch,
                               const std::exception& e, Clock::time_point sentAt,
                               std::chrono::milliseconds budget) {
  dropConnection();
  const auto now = Clock::now();
  if (!unansweredSince_) {  // one warning per outage, not one per attempt
    // A process stopped or starved past the call's budget must not blame the store for that time.
    unansweredSince_ = std::max(sentAt, now - budget);
    log_->warn("rendezvous store call failed during heartbeat of round {}: {}", round.generation,
               e.what());
  }
  restartClocks_ = true;  // this node could not see its peers' heartbeats meanwhile
  // A store that said it is out of descriptors (at any call of this outage) is alive: say so,
  // not that it was lost.
  overloaded_ = overloaded_ || dynamic_cast<const OverloadedError*>(&e) != nullptr;
  const auto silent =
      std::chrono::duration_cast<std::chrono::milliseconds>(now - *unansweredSince_);
  if (silent >= heartbeatTimeout_) {
    const bool overloaded = overloaded_;
    deliver({RendezvousEventKind::kStoreLost, round.generation,
             std::string(overloaded ? "the rendezvous store is overloaded and has not served this "
                                      "node's heartbeat for "
                                    : "the rendezvous store has not answered for ") +
                 msText(silent) + " (heartbeat_timeout " + msText(heartbeatTimeout_) + "): " +
                 e.what()},
            epoch);
  }
}

void RoundMonitor::storeAnswered(const MonitoredRound& round) {
  if (!unansweredSince_) return;
  const auto silent = std::chrono::duration_cast<std::chrono::milliseconds>(
      Clock::now() - *unansweredSince_);
  unansweredSince_.reset();
  overloaded_ = false;
  log_->info("the rendezvous store answers the heartbeat of round {} again after {}; the peers' "
             "silence is counted from this node's next look", round.generation, msText(silent));
}

std::chrono::milliseconds RoundMonitor::callBudget(Clock::time_point at) const {
  // While the store answers, a call gets a whole interval: after this process itself was stopped
  // or starved, the store still deserves a fair chance.
  if (!unansweredSince_) return interval_;
  const auto left =
      std::chrono::ceil<std::chrono::milliseconds>(*unansweredSince_ + heartbeatTimeout_ - at);
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
  const int64_t g = round.generation;
  std::vector<std::string> names;
  for (const auto& peer : watched_) names.push_back(round.keys.heartbeat(g, peer.rank));
  // A peer that never beat may have died after the closer read its join record and before its
  // heartbeat connection armed ON_CLOSE: the ON_CLOSE it armed when it joined turned that record
  // into kDied. Read in the same request, only until the peer's first beat.
  std::vector<size_t> unproven;
  for (size_t i = 0; i < watched_.size(); ++i) {
    if (watched_[i].beaten || watched_[i].slot <= 0) continue;
    unproven.push_back(i);
    names.push_back(round.keys.node(g, watched_[i].slot));
  }
  const auto values = store.multiGet(names);
  const auto now = Clock::now();
  const Watched* died = nullptr;
  for (size_t k = 0; k < unproven.size() && died == nullptr; ++k) {
    if (values[watched_.size() + k] == kDied) died = &watched_[unproven[k]];
  }
  // After this node's own calls failed, every silence starts again from this look.
  const bool restart = std::exchange(restartClocks_, false);
  const Watched* lost = nullptr;
  for (size_t i = 0; i < watched_.size(); ++i) {
    Watched& peer = watched_[i];
    peer.beaten = peer.beaten || values[i] != kNoHeartbeatYet;
    if (restart || values[i] != peer.value) {
      peer.value = values[i];
      peer.changedAt = now;
    } else if (now - peer.changedAt >= heartbeatTimeout_ && lost == nullptr) {
      lost = &peer;
    }
  }
  if (died == nullptr && lost == nullptr) return;
  if (store.check({round.keys.exitDone(g)})) return;
  std::string detail;
  if (died != nullptr) {
    lost = died;
    detail = "node rank " + std::to_string(died->rank) + " (" + died->host +
             ") died before its first heartbeat (its connection to the rendezvous store closed "
             "while it joined round " + std::to_string(g) + "), seen by node rank " +
             std::to_string(round.rank);
  } else {
    const auto silent =
        std::chrono::duration_cast<std::chrono::milliseconds>(now - lost->changedAt);
    detail = "node rank " + std::to_string(lost->rank) + " (" + lost->host +
             ") sent no heartbeat for " + msText(silent) + " (heartbeat_timeout " +
             msText(heartbeatTimeout_) + "), seen by node rank " + std::to_string(round.rank);
  }
  endRound(store, round.keys, g, {RendezvousEventKind::kPeerLost, detail, lost->rank});
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
  deliver({end.kind, g, end.detail, end.lostRank, end.removed, end.verdict}, epoch);
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
