// StoreRendezvous: Rendezvous over any Store; the protocol pieces live in rendezvous/detail/
// (key layout, rank assignment, join protocol, heartbeat monitor).
#include "rendezvous/rendezvous.hpp"

#include <algorithm>
#include <optional>

#include "rendezvous/detail/rendezvous_assign.hpp"
#include "rendezvous/detail/rendezvous_join.hpp"
#include "rendezvous/detail/rendezvous_keys.hpp"
#include "rendezvous/detail/rendezvous_monitor.hpp"
#include "rendezvous/detail/rendezvous_wait.hpp"
#include "rendezvous/logging.hpp"
#include "rendezvous/store.hpp"

namespace ddp {

namespace {

using detail::Clock;

std::string ms(std::chrono::milliseconds d) { return std::to_string(d.count()) + " ms"; }

RendezvousSettings validated(RendezvousSettings s, const NodeDescriptor& self) {
  if (s.minNodes < 1 || s.maxNodes < s.minNodes) {
    throw ConfigError("rendezvous '" + s.runId + "': invalid node range " +
                      std::to_string(s.minNodes) + ":" + std::to_string(s.maxNodes) +
                      " (need 1 <= min_nodes <= max_nodes)");
  }
  if (s.keepAliveInterval.count() <= 0 || s.joinTimeout.count() <= 0) {
    throw ConfigError("rendezvous '" + s.runId +
                      "': keep_alive_interval and join_timeout must be positive");
  }
  if (self.localWorldSize < 1) {
    throw ConfigError("rendezvous '" + s.runId + "': node " + self.host + " has " +
                      std::to_string(self.localWorldSize) + " workers; need at least 1");
  }
  return s;
}

// Slices of blocking waits: short enough that a TCP connection shared with the heartbeat thread
// is never held for long.
std::chrono::milliseconds waitSlice(const RendezvousSettings& s) {
  return std::clamp(s.keepAliveInterval / 4, std::chrono::milliseconds(5),
                    std::chrono::milliseconds(500));
}

class StoreRendezvous final : public Rendezvous {
 public:
  StoreRendezvous(Store& store, RendezvousSettings settings, NodeDescriptor self,
                  StoreConnector heartbeatStore)
      : store_(store),
        settings_(validated(std::move(settings), self)),
        self_(std::move(self)),
        keys_(settings_.runId),
        slice_(waitSlice(settings_)),
        joiner_(store_, keys_, settings_, self_, slice_),
        monitor_(store_, std::move(heartbeatStore), keys_, settings_),
        log_(logger("rdzv")) {}

  RendezvousResult next() override;
  void publishWorkerStore(const std::string& addr, uint16_t port) override;
  std::pair<std::string, uint16_t> workerStore() override;
  void watch(std::function<void(const RendezvousEvent&)> onEvent) override {
    monitor_.setCallback(std::move(onEvent));
  }
  void stopWatching() override { monitor_.clearCallback(); }
  bool reportFailure(const std::string& failureRecordJson) override;
  std::vector<std::string> failureRecords() override;
  ExitOutcome exitBarrier(std::chrono::milliseconds timeout) override;
  void leave() override;
  bool awaitOthersLeft(std::chrono::milliseconds timeout) override;

 private:
  struct Current {
    int64_t generation = 0;
    RendezvousResult result;
  };

  const Current& requireRound(const char* what) const;
  void endRound(int64_t g, RendezvousEventKind kind, const std::string& detail);
  bool awaitFailureDecision(int64_t g);
  bool spendRestart(int64_t g);
  ExitOutcome endedOutcome(int64_t g);
  std::string self() const {
    return "node " + self_.host + " (pid " + std::to_string(self_.pid) + ")";
  }

  Store& store_;
  const RendezvousSettings settings_;
  const NodeDescriptor self_;
  const detail::RendezvousKeys keys_;
  const std::chrono::milliseconds slice_;
  detail::RoundJoiner joiner_;
  detail::RoundMonitor monitor_;
  std::shared_ptr<spdlog::logger> log_;
  // The agent's thread only.
  std::optional<Current> current_;
  int prevRank_ = -1;
  // The generation this agent last left, if it left at all.
  std::optional<int64_t> leftGeneration_;
};

RendezvousResult StoreRendezvous::next() {
  monitor_.exit();
  if (current_) {
    // Re-joining while our round still runs (the caller gave up on it): end it for everybody.
    const int64_t g = current_->generation;
    if (!store_.check({keys_.exitDone(g)})) {
      endRound(g, RendezvousEventKind::kPeerLost,
               self() + " (node rank " + std::to_string(current_->result.nodeRank) +
                   ") left round " + std::to_string(g) + " to join again");
    }
    current_.reset();
  }
  const auto started = Clock::now();
  detail::JoinedRound joined = joiner_.join(prevRank_);
  const RendezvousResult& r = joined.result;
  current_ = Current{r.generation, r};
  prevRank_ = r.nodeRank;
  detail::MonitoredRound round{r.generation, r.nodeRank, {}};
  for (const auto& member : r.members) round.hosts.push_back(member.node.host);
  monitor_.enter(std::move(round));
  log_->info("rendezvous '{}' generation {}: node rank {} of {}, ranks {}..{} of world {} ({} ms)",
             settings_.runId, r.generation, r.nodeRank, r.nodeCount, r.baseRank,
             r.baseRank + self_.localWorldSize - 1, r.worldSize,
             std::chrono::duration_cast<std::chrono::milliseconds>(Clock::now() - started).count());
  return r;
}

const StoreRendezvous::Current& StoreRendezvous::requireRound(const char* what) const {
  if (!current_) {
    throw Error(std::string("rendezvous '") + settings_.runId + "': " + what +
                " called before next() completed a round");
  }
  return *current_;
}

void StoreRendezvous::endRound(int64_t g, RendezvousEventKind kind, const std::string& detail) {
  detail::endRound(store_, keys_, g, {kind, detail});
}

void StoreRendezvous::publishWorkerStore(const std::string& addr, uint16_t port) {
  const Current& cur = requireRound("publishWorkerStore()");
  store_.set(keys_.workerStore(cur.generation), addr + ":" + std::to_string(port));
}

std::pair<std::string, uint16_t> StoreRendezvous::workerStore() {
  const int64_t g = requireRound("workerStore()").generation;
  const auto deadline = Clock::now() + settings_.joinTimeout;
  const auto found = detail::waitForAny(
      store_, {keys_.workerStore(g), keys_.end(g), keys_.ended()}, deadline, slice_);
  if (!found) {
    throw TimeoutError("rendezvous '" + settings_.runId + "': node rank 0 did not publish the " +
                       "worker store of generation " + std::to_string(g) + " within " +
                       ms(settings_.joinTimeout) + " (join_timeout)");
  }
  if (*found == 2) {
    const std::string reason = store_.get(keys_.ended());
    throw JobEndedError("rendezvous '" + settings_.runId + "': the job ended: " + reason,
                        detail::jobSucceeded(reason));
  }
  if (*found == 1) {
    throw RoundEndedError("rendezvous '" + settings_.runId + "' generation " + std::to_string(g) +
                          " ended before its worker store was published: " +
                          detail::decodeRoundEnd(store_.get(keys_.end(g))).detail);
  }
  const std::string value = store_.get(keys_.workerStore(g));
  const auto colon = value.rfind(':');
  int port = -1;
  try {
    port = colon == std::string::npos ? -1 : std::stoi(value.substr(colon + 1));
  } catch (const std::exception&) {
  }
  if (port < 0 || port > 65535) {
    throw ProtocolError("rendezvous '" + settings_.runId + "': malformed worker store address '" +
                        value + "' for generation " + std::to_string(g));
  }
  return {value.substr(0, colon), static_cast<uint16_t>(port)};
}

bool StoreRendezvous::reportFailure(const std::string& failureRecordJson) {
  const int64_t g = requireRound("reportFailure()").generation;
  monitor_.suppress(g);  // the caller learns the outcome from the return value
  store_.append(keys_.failures(), detail::frameRecord(failureRecordJson));
  if (store_.check({keys_.end(g)})) return awaitFailureDecision(g);
  // Only the first failure of a generation spends a restart: one generation fails once.
  if (store_.add(keys_.failCount(g), 1) != 1) return awaitFailureDecision(g);
  return spendRestart(g);
}

bool StoreRendezvous::spendRestart(int64_t g) {
  const int rank = current_->result.nodeRank;
  const int64_t used = store_.add(keys_.restarts(), 1);
  if (used <= settings_.maxRestarts) {
    endRound(g, RendezvousEventKind::kRestartRequested,
             "workers failed on node rank " + std::to_string(rank) + " (" + self_.host +
                 "); restart " + std::to_string(used) + " of " +
                 std::to_string(settings_.maxRestarts));
    return true;
  }
  const std::string reason = "workers failed on node rank " + std::to_string(rank) + " (" +
                             self_.host + ") in generation " + std::to_string(g) +
                             " and the job's restart budget (max_restarts=" +
                             std::to_string(settings_.maxRestarts) + ") is spent";
  store_.set(keys_.ended(), reason);
  endRound(g, RendezvousEventKind::kJobFailed, reason);
  log_->error("rendezvous '{}': {}", settings_.runId, reason);
  return false;
}

bool StoreRendezvous::awaitFailureDecision(int64_t g) {
  // Another node reported first (or the round already ended): its decision stands.
  const auto deadline = Clock::now() + settings_.closeTimeout;
  const auto found = detail::waitForAny(store_, {keys_.end(g), keys_.ended()}, deadline, slice_);
  if (store_.check({keys_.ended()})) return false;
  if (!found) {
    throw TimeoutError("rendezvous '" + settings_.runId + "': generation " + std::to_string(g) +
                       " did not end within " + ms(settings_.closeTimeout) +
                       " (close_timeout) after another node reported a failure");
  }
  return true;
}

std::vector<std::string> StoreRendezvous::failureRecords() {
  return detail::unframeRecords(store_.compareSet(keys_.failures(), "", ""));
}

ExitOutcome StoreRendezvous::exitBarrier(std::chrono::milliseconds timeout) {
  const Current& cur = requireRound("exitBarrier()");
  const int64_t g = cur.generation;
  // A round that already ended (a failure elsewhere, a lost peer) cannot succeed any more.
  if (store_.check({keys_.end(g)})) return endedOutcome(g);
  if (store_.add(keys_.exitCount(g), 1) >= cur.result.nodeCount) {
    store_.set(keys_.exitDone(g), "1");
    // Agents that arrive from now on learn that there is nothing left to join.
    store_.compareSet(keys_.ended(), "",
                      std::string(detail::kJobFinished) + ": all " +
                          std::to_string(cur.result.nodeCount) +
                          " node(s) of generation " + std::to_string(g) + " succeeded");
  }
  const auto deadline = Clock::now() + timeout;
  const auto found = detail::waitForAny(store_, {keys_.exitDone(g), keys_.end(g)}, deadline, slice_);
  if (found == 0u) return ExitOutcome::kAllSucceeded;
  if (found == 1u) return endedOutcome(g);
  const int64_t arrived = store_.add(keys_.exitCount(g), 0);
  throw TimeoutError("rendezvous '" + settings_.runId + "' generation " + std::to_string(g) +
                     ": exit barrier timed out after " + ms(timeout) + " with " +
                     std::to_string(arrived) + " of " + std::to_string(cur.result.nodeCount) +
                     " nodes done");
}

ExitOutcome StoreRendezvous::endedOutcome(int64_t g) {
  const auto end = detail::decodeRoundEnd(store_.get(keys_.end(g)));
  if (end.kind == RendezvousEventKind::kJobFailed || store_.check({keys_.ended()})) {
    return ExitOutcome::kJobFailed;
  }
  return ExitOutcome::kRestartRequested;
}

void StoreRendezvous::leave() {
  monitor_.exit();
  if (!current_) return;
  const int64_t g = current_->generation;
  const int rank = current_->result.nodeRank;
  const int nodes = current_->result.nodeCount;
  current_.reset();
  try {
    // Once every node passed the exit barrier, or the job failed, leaving is the normal end:
    // nobody re-rendezvous. Otherwise the others must re-form without this node.
    const bool jobOver = store_.check({keys_.exitDone(g)}) || store_.check({keys_.ended()});
    if (!jobOver) {
      endRound(g, RendezvousEventKind::kPeerLost,
               self() + " (node rank " + std::to_string(rank) + ") left the job");
    }
    // The last store call of this agent: the agent hosting the store waits for all of them.
    if (store_.add(keys_.left(g), 1) >= nodes) store_.set(keys_.allLeft(g), "1");
    leftGeneration_ = g;
  } catch (const std::exception& e) {
    log_->warn("rendezvous '{}': leaving generation {} failed: {}", settings_.runId, g, e.what());
  }
}

bool StoreRendezvous::awaitOthersLeft(std::chrono::milliseconds timeout) {
  if (!leftGeneration_) return true;
  try {
    const auto deadline = Clock::now() + timeout;
    if (detail::waitForAny(store_, {keys_.allLeft(*leftGeneration_)}, deadline, slice_)) return true;
    log_->warn("rendezvous '{}': not every node left generation {} within {}; closing the store "
               "anyway", settings_.runId, *leftGeneration_, ms(timeout));
  } catch (const std::exception& e) {
    log_->warn("rendezvous '{}': waiting for the other nodes to leave failed: {}",
               settings_.runId, e.what());
  }
  return false;
}

}  // namespace

std::unique_ptr<Rendezvous> makeRendezvous(Store& store, RendezvousSettings settings,
                                           NodeDescriptor self, StoreConnector heartbeatStore) {
  return std::make_unique<StoreRendezvous>(store, std::move(settings), std::move(self),
                                           std::move(heartbeatStore));
}

}  // namespace ddp
