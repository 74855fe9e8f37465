// StoreRendezvous: Rendezvous over any Store, with its FailureLedger and ExclusionBoard; the
// protocol pieces live in algorithm/detail/ (key layout, rank assignment, join protocol and closing
// rule, run-id lifecycle, heartbeat monitor). This file ties them to one agent: its incarnation,
// its rounds, its outcomes.
#include "rendezvous/algorithm/rendezvous.hpp"

#include <time.h>

#include <algorithm>
#include <optional>
#include <set>

#include "rendezvous/algorithm/detail/node_exclusion.hpp"
#include "rendezvous/algorithm/detail/rendezvous_assign.hpp"
#include "rendezvous/algorithm/detail/rendezvous_join.hpp"
#include "rendezvous/algorithm/detail/rendezvous_keys.hpp"
#include "rendezvous/algorithm/detail/rendezvous_lifecycle.hpp"
#include "rendezvous/algorithm/detail/rendezvous_monitor.hpp"
#include "rendezvous/algorithm/detail/rendezvous_round.hpp"
#include "rendezvous/algorithm/detail/rendezvous_wait.hpp"
#include "rendezvous/algorithm/detail/round_records.hpp"
#include "rendezvous/base/logging.hpp"
#include "rendezvous/store/store.hpp"

namespace ddp {

namespace {

using detail::Clock;

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
  if (s.jobFingerprint.size() > kMaxJobFingerprint) {
    throw ConfigError("rendezvous '" + s.runId + "': the job fingerprint has " +
                      std::to_string(s.jobFingerprint.size()) + " bytes; at most " +
                      std::to_string(kMaxJobFingerprint));
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

std::string wallTime(int64_t unixMs) {
  const time_t seconds = static_cast<time_t>(unixMs / 1000);
  tm local{};
  char buf[64] = "an unknown time";
  if (unixMs > 0 && localtime_r(&seconds, &local) != nullptr) {
    strftime(buf, sizeof(buf), "%Y-%m-%d %H:%M:%S %Z", &local);
  }
  return buf;
}

// The rendezvous's FailureLedger: RoundState's reports, and the records this agent published or
// read, for snapshot(). The monitor stays silent for a generation this node reported itself.
class StoreFailureLedger final : public FailureLedger {
 public:
  StoreFailureLedger(detail::RoundState& rounds, detail::RoundMonitor& monitor)
      : rounds_(rounds), monitor_(monitor) {}

  RendezvousEvent reportFailure(const std::string& failureRecordJson) override {
    return report(failureRecordJson, {});
  }
  RendezvousEvent reportVerdict(const std::string& failureRecordJson,
                                const std::string& verdict) override {
    return report(failureRecordJson, verdict);
  }
  RecoveryResult recordRecovery(const std::string& failureRecordJson) override {
    known_.push_back(failureRecordJson);
    return rounds_.recordRecovery(failureRecordJson);
  }
  std::vector<std::string> failureRecords() override { return rounds_.failureRecords(); }

  // next() returned `r` (after `previous`): reads the job's records when a restart was spent
  // since they were last read (one store call per restart, none on the common path).
  void roundFormed(const RendezvousResult& r, const std::optional<RendezvousResult>& previous,
                   spdlog::logger& log, const std::string& runId);
  const std::vector<std::string>& known() const { return known_; }

 private:
  RendezvousEvent report(const std::string& failureRecordJson, const std::string& verdict) {
    known_.push_back(failureRecordJson);
    if (rounds_.current()) monitor_.suppress(rounds_.current()->generation);
    return rounds_.reportFailure(failureRecordJson, verdict);
  }

  detail::RoundState& rounds_;
  detail::RoundMonitor& monitor_;
  std::vector<std::string> known_;
  int readAt_ = 0;  // the restart count as of which known_ was read
};

void StoreFailureLedger::roundFormed(const RendezvousResult& r,
                                     const std::optional<RendezvousResult>& previous,
                                     spdlog::logger& log, const std::string& runId) {
  if (previous && r.restartsUsed < previous->restartsUsed) {  // a new incarnation
    known_.clear();
    readAt_ = 0;
  }
  if (r.restartsUsed <= readAt_) return;
  try {
    known_ = rounds_.failureRecords();
    readAt_ = r.restartsUsed;
  } catch (const Error& e) {
    log.debug("rendezvous '{}': failure records not read ({})", runId, e.what());
  }
}

// The rendezvous's ExclusionBoard: RoundState's claim and sit-out, the job's list read back.
class StoreExclusionBoard final : public ExclusionBoard {
 public:
  StoreExclusionBoard(Store& store, detail::RoundState& rounds, detail::RoundMonitor& monitor)
      : store_(store), rounds_(rounds), monitor_(monitor) {}

  ExclusionClaim claim(const NodeExclusion& exclusion) override {
    return rounds_.claimExclusion(exclusion);
  }
  bool sitOut(std::chrono::milliseconds cooldown) override {
    monitor_.exit();
    return rounds_.sitOut(cooldown);
  }
  void markReturned(int64_t generation) override { rounds_.markReturned(generation); }
  std::vector<NodeExclusion> list() override {
    if (!rounds_.keys()) return {};
    const auto value = detail::peek(store_, rounds_.keys()->exclusions());
    return value ? detail::decodeExclusions(*value) : std::vector<NodeExclusion>{};
  }
  int64_t count() override {
    if (!rounds_.keys()) return 0;
    const auto value = detail::peek(store_, rounds_.keys()->exclusionCount());
    return value ? detail::parseCount(rounds_.keys()->exclusionCount(), *value) : 0;
  }

 private:
  Store& store_;
  detail::RoundState& rounds_;
  detail::RoundMonitor& monitor_;
};

class StoreRendezvous final : public Rendezvous {
 public:
  StoreRendezvous(Store& store, RendezvousSettings settings, NodeDescriptor self,
                  StoreConnector heartbeatStore)
      : settings_(validated(std::move(settings), self)),
        self_(std::move(self)),
        rounds_(store, settings_, self_, waitSlice(settings_)),
        joiner_(store, settings_, self_, waitSlice(settings_)),
        monitor_(store, std::move(heartbeatStore), settings_),
        store_(store),
        failures_(rounds_, monitor_),
        exclusions_(store, rounds_, monitor_),
        log_(logger("rdzv")) {}

  NextResult next() override;
  void publishWorkerStore(const std::string& addr, uint16_t port) override {
    rounds_.publishWorkerStore(addr, port);
  }
  WorkerStoreResult workerStore() override { return rounds_.workerStore(); }
  std::vector<std::string> memberAddresses() override;
  void watch(std::function<void(const RendezvousEvent&)> onEvent) override {
    monitor_.setCallback(std::move(onEvent));
  }
  void stopWatching() override { monitor_.clearCallback(); }
  std::optional<RendezvousEvent> awaitRoundEnd(std::chrono::milliseconds timeout) override {
    return rounds_.awaitRoundEnd(timeout);
  }
  ExitBarrierResult exitBarrier(std::chrono::milliseconds timeout) override {
    return rounds_.exitBarrier(timeout);
  }
  void leave() override {
    monitor_.exit();
    rounds_.leave();
  }
  bool awaitOthersLeft(std::chrono::milliseconds timeout) override {
    return rounds_.awaitOthersLeft(timeout);
  }
  void publishRoundRecord(const std::string& name, const std::string& value) override;
  JobSnapshot snapshot() const override;
  FailureLedger& failures() override { return failures_; }
  ExclusionBoard& exclusions() override { return exclusions_; }
  RoundRecordsResult roundRecords(const std::string& name, const std::vector<int>& nodeRanks,
                                  std::chrono::milliseconds timeout) override;

 private:
  const detail::RoundState::Current& currentRound(const char* what) const;
  NextResult entered(detail::JoinedRound joined, Clock::time_point started);
  JobEnded jobEnded(const detail::RendezvousKeys& keys);
  void rememberRound(const RendezvousResult& r);
  void startFresh(const detail::IncarnationState& ended);

  const RendezvousSettings settings_;
  const NodeDescriptor self_;
  detail::RoundState rounds_;
  detail::RoundJoiner joiner_;
  detail::RoundMonitor monitor_;
  Store& store_;
  StoreFailureLedger failures_;
  StoreExclusionBoard exclusions_;
  std::shared_ptr<spdlog::logger> log_;
  // The agent's thread only.
  bool ownerChecked_ = false;
  // What snapshot() returns: this agent's newest round (the failure records are failures_').
  std::optional<RendezvousResult> lastRound_;
};

NextResult StoreRendezvous::next() {
  monitor_.exit();
  rounds_.leaveRunningRound();
  if (!ownerChecked_) {
    detail::checkStoreOwner(store_, settings_.runId, rounds_.self());
    ownerChecked_ = true;
  }
  const auto started = Clock::now();
  while (true) {
    const detail::IncarnationState inc = detail::readIncarnation(store_, settings_.runId);
    const auto& attached = rounds_.keys();
    // The job this node was part of ended (and maybe another one started since).
    if (attached && (attached->incarnation() != inc.number || inc.ended)) {
      return jobEnded(*attached);
    }
    if (inc.ended) {
      startFresh(inc);
      continue;
    }
    if (!attached) {
      detail::RendezvousKeys keys(settings_.runId, inc.number);
      const auto claim =
          detail::claimIncarnation(store_, keys, settings_.jobFingerprint, rounds_.self());
      if (claim == detail::IncarnationClaim::kEnded) continue;  // read the new state
      rounds_.attach(std::move(keys));
    }
    auto outcome = joiner_.join(*rounds_.keys(), rounds_.history());
    if (auto* joined = std::get_if<detail::JoinedRound>(&outcome)) {
      return entered(std::move(*joined), started);
    }
  }
}

NextResult StoreRendezvous::entered(detail::JoinedRound joined, Clock::time_point started) {
  const RendezvousResult& r = joined.result;
  rounds_.enter(r);
  rememberRound(r);
  monitor_.enter(detail::MonitoredRound{r.generation, r.nodeRank, self_.host,
                                        std::move(joined.watched), *rounds_.keys()});
  log_->info("rendezvous '{}' generation {}: node rank {} of {}, ranks {}..{} of world {} ({} ms)",
             settings_.runId, r.generation, r.nodeRank, r.nodeCount, r.baseRank,
             r.baseRank + self_.localWorldSize - 1, r.worldSize,
             std::chrono::duration_cast<std::chrono::milliseconds>(Clock::now() - started).count());
  return std::move(joined.result);
}

// Keeps what snapshot() returns.
void StoreRendezvous::rememberRound(const RendezvousResult& r) {
  failures_.roundFormed(r, lastRound_, *log_, settings_.runId);
  lastRound_ = r;
}

JobSnapshot StoreRendezvous::snapshot() const {
  JobSnapshot s;
  s.runId = settings_.runId;
  if (rounds_.keys()) s.incarnation = rounds_.keys()->incarnation();
  if (lastRound_) {
    s.generation = lastRound_->generation;
    s.restartsUsed = lastRound_->restartsUsed;
  }
  s.failureRecords = failures_.known();
  return s;
}

void StoreRendezvous::startFresh(const detail::IncarnationState& ended) {
  const int64_t now = detail::startNextIncarnation(store_, settings_.runId, ended.number);
  log_->info("run id {} ended at {} ({}); starting a new job (incarnation {})", settings_.runId,
             wallTime(ended.ended->unixMs), ended.ended->succeeded ? "succeeded" : "failed", now);
}

JobEnded StoreRendezvous::jobEnded(const detail::RendezvousKeys& keys) {
  JobEnded e;
  if (auto value = detail::peek(store_, keys.ended())) {
    const detail::JobEnd end = detail::decodeJobEnd(*value);
    e.result = end.succeeded ? JobResult::kSucceeded : JobResult::kFailed;
    e.reason = end.reason;
    e.endedAtUnixMs = end.unixMs;
    e.lastGeneration = end.generation;
    e.verdict = end.verdict;
  } else {
    e.reason = "the job ended, and a new job with run id " + settings_.runId +
               " has started since (its record is gone)";
  }
  const detail::MemberHistory history = rounds_.history();
  e.memberGeneration = history.generation;
  if (history.generation < 0) {
    e.standing = NodeStanding::kNeverMember;
  } else if (history.generation == e.lastGeneration) {
    e.standing = NodeStanding::kMember;
  } else {
    e.standing = NodeStanding::kDropped;
    if (auto end = detail::peek(store_, keys.end(history.generation))) {
      e.droppedDetail = detail::decodeRoundEnd(*end).detail;
    }
  }
  return e;
}

const detail::RoundState::Current& StoreRendezvous::currentRound(const char* what) const {
  if (!rounds_.current()) {
    throw Error("rendezvous '" + settings_.runId + "': " + what +
                " called before next() completed a round");
  }
  return *rounds_.current();
}

void StoreRendezvous::publishRoundRecord(const std::string& name, const std::string& value) {
  const auto& round = currentRound("publishRoundRecord()");
  detail::publishRecord(store_, *rounds_.keys(), round.generation, name, round.result.nodeRank,
                        value);
}

std::vector<std::string> StoreRendezvous::memberAddresses() {
  const int64_t g = currentRound("memberAddresses()").generation;
  std::vector<std::string> addrs;
  const auto roster = detail::peek(store_, rounds_.keys()->roster(g));
  if (!roster) return addrs;  // the round's keys are gone
  std::set<std::string> seen;
  auto add = [&](const std::string& addr) {
    if (!addr.empty() && seen.insert(addr).second) addrs.push_back(addr);
  };
  for (const auto& member : detail::decodeMembership(*roster).members) {
    add(member.node.addr);
    for (const auto& addr : member.node.interfaceAddrs) add(addr);
  }
  return addrs;
}

RoundRecordsResult StoreRendezvous::roundRecords(const std::string& name,
                                                 const std::vector<int>& nodeRanks,
                                                 std::chrono::milliseconds timeout) {
  const int64_t g = currentRound("roundRecords()").generation;
  detail::RecordsOrEnd got = detail::awaitRecords(store_, *rounds_.keys(), g, name, nodeRanks,
                                                  Clock::now() + timeout, waitSlice(settings_));
  if (got.end) {
    const auto& end = *got.end;
    return RoundEnded{RendezvousEvent{end.kind, g, end.detail, end.lostRank, end.removed,
                                      end.verdict}};
  }
  return std::move(got.values);
}

}  // namespace

std::unique_ptr<Rendezvous> makeRendezvous(Store& store, RendezvousSettings settings,
                                           NodeDescriptor self, StoreConnector heartbeatStore) {
  return std::make_unique<StoreRendezvous>(store, std::move(settings), std::move(self),
                                           std::move(heartbeatStore));
}

std::string rendezvousOwnerKey() { return detail::RendezvousKeys::owner(); }

ExclusionClaim claimExclusion(Store& store, const std::string& runId, int64_t incarnation,
                              int64_t generation, int members, int minNodes,
                              const NodeExclusion& exclusion) {
  return detail::claimExclusion(store, detail::RendezvousKeys(runId, incarnation), generation,
                                members, minNodes, exclusion);
}

}  // namespace ddp
