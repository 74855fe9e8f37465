#include "launcher/status/status_publisher.hpp"

#include <unistd.h>

#include "rendezvous/algorithm/detail/rendezvous_keys.hpp"
#include "rendezvous/base/logging.hpp"
#include "rendezvous/store/tcp_store_client.hpp"

namespace ddp {

// A copy of the work one tick does, taken under the lock.
struct StatusPublisher::Pending {
  std::optional<NodeStatus> node;
  std::vector<GenerationEnd> history;
  std::string relayAddr;
  uint16_t relayPort = 0;
  int64_t relayGeneration = -1;
  bool steps = false;  // a straggler tick: node is this node's record to add the step fields to
};

StatusPublisher::StatusPublisher(StatusPublisherSettings settings)
    : settings_(std::move(settings)) {
  node_.host = settings_.host;
  node_.agentPid = static_cast<int>(::getpid());
  node_.maxRestarts = settings_.maxRestarts;
  if (settings_.stragglers) {
    const auto& rule = settings_.stragglers->rule();
    logger("agent")->info("straggler detection: a rank whose compute time per step is over {} x the "
                          "job's median for {} s is flagged",
                          rule.threshold, std::chrono::duration<double>(rule.window).count());
  }
  thread_ = std::thread([this] { run(); });
}

StatusPublisher::~StatusPublisher() {
  {
    std::lock_guard<std::mutex> lock(mutex_);
    stopping_ = true;
    historyPending_.clear();
    nodeDirty_ = false;
  }
  wake_.notify_all();
  if (thread_.joinable()) thread_.join();
}

void StatusPublisher::beginGeneration(const RendezvousResult& round,
                                      const std::string& workerStoreAddr,
                                      uint16_t workerStorePort) {
  {
    std::lock_guard<std::mutex> lock(mutex_);
    if (round.nodeRank == 0) queueHistory();
    node_.generation = round.generation;
    node_.nodeRank = round.nodeRank;
    node_.nodeCount = round.nodeCount;
    node_.worldSize = round.worldSize;
    node_.restartsUsed = round.restartsUsed;
    node_.workers.clear();
    node_.ended.clear();
    node_.steps.reset();
    nodeDirty_ = true;
    relayAddr_ = workerStoreAddr;
    relayPort_ = workerStorePort;
    relayGeneration_ = round.generation;
  }
  wake_.notify_all();
}

void StatusPublisher::queueHistory() {
  historyPending_.insert(historyPending_.end(), ends_.begin(), ends_.end());
}

void StatusPublisher::workers(const std::vector<WorkerState>& states) {
  {
    std::lock_guard<std::mutex> lock(mutex_);
    node_.workers = states;
    nodeDirty_ = true;
  }
  wake_.notify_all();
}

void StatusPublisher::endGeneration(const std::string& how, const std::string& detail) {
  {
    std::lock_guard<std::mutex> lock(mutex_);
    if (node_.generation < 0) return;
    node_.ended = how;
    nodeDirty_ = true;
    if (!ends_.empty() && ends_.back().generation == node_.generation) ends_.pop_back();
    ends_.push_back(GenerationEnd{node_.generation, node_.nodeCount, node_.worldSize,
                                  node_.restartsUsed, how, detail});
    while (ends_.size() > kHistoryEntries) ends_.pop_front();
    relayNow_ = relayPort_ != 0;
  }
  wake_.notify_all();
}

void StatusPublisher::finish() {
  {
    std::lock_guard<std::mutex> lock(mutex_);
    if (stopping_) return;
    if (node_.nodeRank == 0) queueHistory();
    stopping_ = true;  // the last tick still relays: the metrics key is deleted only after it
  }
  wake_.notify_all();
  if (thread_.joinable()) thread_.join();
}

void StatusPublisher::run() {
  std::unique_lock<std::mutex> lock(mutex_);
  bool failed = false;
  while (true) {
    if (failed) {  // the store did not take it: try again on the next tick, not at once
      wake_.wait_for(lock, settings_.relayInterval, [this] { return stopping_; });
    } else {
      wake_.wait_for(lock, settings_.relayInterval, [this] {
        return stopping_ || nodeDirty_ || relayNow_ || !historyPending_.empty();
      });
    }
    Pending work;
    if (nodeDirty_) work.node = node_;
    nodeDirty_ = false;
    work.history.swap(historyPending_);
    work.relayAddr = relayAddr_;
    work.relayPort = relayPort_;
    work.relayGeneration = relayGeneration_;
    relayNow_ = false;
    const auto now = std::chrono::steady_clock::now();
    if (settings_.stragglers && node_.generation >= 0 && node_.ended.empty() && !stopping_ &&
        now >= nextSteps_) {
      work.steps = true;
      if (!work.node) work.node = node_;
      nextSteps_ = now + stepInterval();
    }
    const bool last = stopping_;
    if (!work.node && work.history.empty() && work.relayPort == 0) {
      if (last) return;
      lock.unlock();
      closeIdleStore();  // nothing to write: no store traffic, and no connection held for long
      lock.lock();
      continue;
    }
    lock.unlock();
    failed = !publish(work);
    lock.lock();
    if (last) return;
    // What failed goes again on the next tick (node_ already holds the newest record).
    if (work.node) nodeDirty_ = true;
    historyPending_.insert(historyPending_.begin(), work.history.begin(), work.history.end());
  }
}

void StatusPublisher::ensureStore() {
  if (!store_) {
    store_ = settings_.connect(settings_.budget);
    store_->setTimeout(settings_.budget);
  }
  storeUsed_ = std::chrono::steady_clock::now();
}

void StatusPublisher::closeIdleStore() {
  if (store_ && std::chrono::steady_clock::now() - storeUsed_ >= settings_.idleClose) store_.reset();
}

int64_t StatusPublisher::incarnation() {
  const auto value = detail::peek(*store_, detail::RendezvousKeys::incarnationOf(settings_.runId));
  return value ? detail::parseCount("inc", *value) : 0;
}

// Publishes `work`; clears what was published (the rest is retried). False when a call failed.
bool StatusPublisher::publish(Pending& work) {
  try {
    ensureStore();
    const detail::RendezvousKeys keys(settings_.runId, incarnation());
    if (work.steps && work.node) publishSteps(settings_.runId, keys.incarnation(), *work.node);
    if (work.node) {
      store_->set(keys.status(work.node->generation, work.node->nodeRank),
                  nodeStatusJson(*work.node));
      work.node.reset();
    }
    if (!work.history.empty()) {
      std::vector<FailureRecord> records;
      if (const auto framed = detail::peek(*store_, keys.failures())) {
        for (const auto& text : detail::unframeRecords(*framed)) {
          try {
            records.push_back(failureRecordFromJson(text));
          } catch (const std::exception&) {  // another version's record: no root cause from it
          }
        }
      }
      const std::string before = detail::peek(*store_, keys.history()).value_or("");
      std::string history = before;
      for (const auto& end : work.history) {  // what the history lacks: an entry is written once
        if (!historyHas(history, end.generation)) {
          history = appendHistory(history, historyEntryJson(end, records));
        }
      }
      if (history != before) store_->set(keys.history(), history);
      work.history.clear();
    }
    if (work.relayPort != 0) relay(work);
    return true;
  } catch (const std::exception& e) {
    logger("agent")->debug("status: publishing failed (retrying): {}", e.what());
    store_.reset();
    workerStore_.reset();
    return false;
  }
}

void StatusPublisher::relay(Pending& work) {
  const int64_t inc = incarnation();
  const detail::RendezvousKeys keys(settings_.runId, inc);
  if (ringIncarnation_ != inc) {  // continue the ring an earlier node rank 0 kept
    ring_.clear();
    if (const auto kept = detail::peek(*store_, keys.metrics())) {
      for (auto& line : splitLines(*kept)) pushRing(ring_, std::move(line));
    }
    ringIncarnation_ = inc;
  }
  if (!workerStore_ || workerStorePort_ != work.relayPort || workerStoreAddr_ != work.relayAddr) {
    TcpStoreClientOptions options;
    options.endpoint = {work.relayAddr, work.relayPort};
    options.connectTimeout = settings_.budget;
    options.timeout = settings_.budget;
    workerStore_ = std::make_unique<TcpStoreClient>(options);
    workerStoreAddr_ = work.relayAddr;
    workerStorePort_ = work.relayPort;
    reader_ = MetricPointReader();
  }
  bool added = false;
  for (const auto& point : reader_.readNew(*workerStore_)) {
    if (auto line = ringPoint(point, work.relayGeneration)) {
      pushRing(ring_, std::move(*line));
      added = true;
    }
  }
  if (added) store_->set(keys.metrics(), joinLines(ring_));
}

}  // namespace ddp
