#include "rendezvous/algorithm/detail/rendezvous_round.hpp"

#include "rendezvous/algorithm/detail/node_exclusion.hpp"
#include "rendezvous/algorithm/detail/rendezvous_lifecycle.hpp"
#include "rendezvous/algorithm/detail/rendezvous_text.hpp"
#include "rendezvous/base/duration_text.hpp"
#include "rendezvous/base/logging.hpp"

namespace ddp::detail {

RoundState::RoundState(Store& store, const RendezvousSettings& settings,
                       const NodeDescriptor& self, std::chrono::milliseconds slice)
    : store_(store), settings_(settings), node_(self), slice_(slice), log_(logger("rdzv")) {}

std::string RoundState::self() const {
  return "node " + node_.host + " (pid " + std::to_string(node_.pid) + ")";
}

void RoundState::enter(const RendezvousResult& round) {
  current_ = Current{round.generation, round};
  member_ = current_;
  history_ = MemberHistory{round.nodeRank, round.generation};
}

const RoundState::Current& RoundState::requireRound(const char* what) const {
  if (!current_) {
    throw Error(std::string("rendezvous '") + settings_.runId + "': " + what +
                " called before next() completed a round");
  }
  return *current_;
}

void RoundState::leaveRunningRound() {
  if (!current_) return;
  const int64_t g = current_->generation;
  const int rank = current_->result.nodeRank;
  current_.reset();
  // Re-joining while our round still runs (the caller gave up on it): end it for everybody.
  if (readRoundEnd(store_, *keys_, g) || store_.check({keys_->exitDone(g)})) return;
  endRound(store_, *keys_, g,
           {RendezvousEventKind::kPeerLost, self() + " (node rank " + std::to_string(rank) +
                                                ") left round " + std::to_string(g) +
                                                " to join again"});
}

RoundState::KeyOrEnd RoundState::awaitKeyOrEnd(const std::string& key, int64_t g,
                                               Clock::time_point deadline) {
  while (true) {
    const auto until = std::min(deadline, Clock::now() + slice_ * 4);
    if (waitForAny(store_, {key}, until, slice_)) return {true, std::nullopt};
    if (auto end = readRoundEnd(store_, *keys_, g)) return {false, end};
    if (Clock::now() >= deadline) return {};
  }
}

void RoundState::publishWorkerStore(const std::string& addr, uint16_t port) {
  const Current& cur = requireRound("publishWorkerStore()");
  store_.set(keys_->workerStore(cur.generation), addr + ":" + std::to_string(port));
}

WorkerStoreResult RoundState::workerStore() {
  const int64_t g = requireRound("workerStore()").generation;
  const KeyOrEnd got = awaitKeyOrEnd(keys_->workerStore(g), g,
                                     Clock::now() + settings_.joinTimeout);
  if (got.end) return RoundEnded{eventOf(g, *got.end)};
  if (!got.found) {
    throw TimeoutError("rendezvous '" + settings_.runId + "': node rank 0 did not publish the " +
                       "worker store of generation " + std::to_string(g) + " within " +
                       msText(settings_.joinTimeout) + " (join_timeout)");
  }
  const std::string value = store_.get(keys_->workerStore(g));
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
  return WorkerStoreEndpoint{value.substr(0, colon), static_cast<uint16_t>(port)};
}

std::optional<RendezvousEvent> RoundState::awaitRoundEnd(std::chrono::milliseconds timeout) {
  const int64_t g = requireRound("awaitRoundEnd()").generation;
  const KeyOrEnd got = awaitKeyOrEnd(keys_->end(g), g, Clock::now() + timeout);
  if (got.end) return eventOf(g, *got.end);
  if (got.found) return eventOf(g, explainRoundEnd(store_, *keys_, g));
  return std::nullopt;
}

RendezvousEvent RoundState::reportFailure(const std::string& failureRecordJson,
                                          const std::string& verdict) {
  const int64_t g = requireRound("reportFailure()").generation;
  store_.append(keys_->failures(), frameRecord(failureRecordJson));
  // The round already ended (a lost peer, a scale-up, an earlier report): its cause stands.
  if (store_.check({keys_->end(g)})) return eventOf(g, explainRoundEnd(store_, *keys_, g));
  // Only the first failure of a generation spends a restart: one generation fails once.
  if (store_.add(keys_->failCount(g), 1) != 1) return awaitFailureDecision(g);
  // A verdict stops a job only while restarts are left: with the budget spent the job fails as
  // it would without one, with the root cause's exit code (torchrun's contract).
  if (!verdict.empty() && store_.add(keys_->restarts(), 0) < settings_.maxRestarts) {
    return endWithVerdict(g, verdict);
  }
  return spendRestart(g);
}

// The generation's first report carries a verdict: the job ends instead of restarting, nothing
// spent. The tombstone first, as spendRestart does, so a node that rejoins learns the verdict.
RendezvousEvent RoundState::endWithVerdict(int64_t g, const std::string& verdict) {
  JobEnd job = jobEndNow(false, g, verdict);
  job.verdict = true;
  store_.compareSet(keys_->ended(), "", encodeJobEnd(job));
  RoundEnd end{RendezvousEventKind::kJobFailed, verdict};
  end.verdict = true;
  endRound(store_, *keys_, g, end);
  log_->error("rendezvous '{}': {}", settings_.runId, verdict);
  return eventOf(g, explainRoundEnd(store_, *keys_, g));
}

RecoveryResult RoundState::recordRecovery(const std::string& failureRecordJson) {
  const int64_t g = requireRound("recordRecovery()").generation;
  // The round already ended (a lost peer, a scale-up, a failure reported): its cause stands.
  if (store_.check({keys_->end(g)})) return RoundEnded{eventOf(g, explainRoundEnd(store_, *keys_, g))};
  const int64_t used = store_.add(keys_->restarts(), 1);
  if (used <= settings_.maxRestarts) {
    store_.append(keys_->failures(), frameRecord(failureRecordJson));
    return RecoveryGranted{int(used)};
  }
  // Not recovered: the node's record of the failed generation (job_summary.hpp) says what failed.
  return RoundEnded{failBudgetSpent(g)};
}

RendezvousEvent RoundState::spendRestart(int64_t g) {
  const int rank = current_->result.nodeRank;
  const int64_t used = store_.add(keys_->restarts(), 1);
  if (used <= settings_.maxRestarts) {
    const RoundEnd end{RendezvousEventKind::kRestartRequested,
                       "workers failed on node rank " + std::to_string(rank) + " (" +
                           node_.host + "); restart " + std::to_string(used) + " of " +
                           std::to_string(settings_.maxRestarts)};
    endRound(store_, *keys_, g, end);
    return eventOf(g, explainRoundEnd(store_, *keys_, g));
  }
  return failBudgetSpent(g);
}

RendezvousEvent RoundState::failBudgetSpent(int64_t g) {
  const int rank = current_->result.nodeRank;
  const std::string reason = "workers failed on node rank " + std::to_string(rank) + " (" +
                             node_.host + ") in generation " + std::to_string(g) +
                             " and the job's restart budget (max_restarts=" +
                             std::to_string(settings_.maxRestarts) + ") is spent";
  store_.compareSet(keys_->ended(), "", encodeJobEnd(jobEndNow(false, g, reason)));
  endRound(store_, *keys_, g, {RendezvousEventKind::kJobFailed, reason});
  log_->error("rendezvous '{}': {}", settings_.runId, reason);
  return RendezvousEvent{RendezvousEventKind::kJobFailed, g, reason};
}

RendezvousEvent RoundState::awaitFailureDecision(int64_t g) {
  // Another node reported first: its decision stands.
  const KeyOrEnd got = awaitKeyOrEnd(keys_->end(g), g, Clock::now() + settings_.closeTimeout);
  if (got.end) return eventOf(g, *got.end);
  if (got.found) return eventOf(g, explainRoundEnd(store_, *keys_, g));
  throw TimeoutError("rendezvous '" + settings_.runId + "': generation " + std::to_string(g) +
                     " did not end within " + msText(settings_.closeTimeout) +
                     " (close_timeout) after another node reported a failure");
}

std::vector<std::string> RoundState::failureRecords() {
  if (!keys_) return {};
  const auto value = peek(store_, keys_->failures());
  return value ? unframeRecords(*value) : std::vector<std::string>{};
}

ExitBarrierResult RoundState::exitBarrier(std::chrono::milliseconds timeout) {
  const Current& cur = requireRound("exitBarrier()");
  const int64_t g = cur.generation;
  // A round that already ended (a failure elsewhere, a lost peer) cannot succeed any more.
  if (auto end = readRoundEnd(store_, *keys_, g)) return RoundEnded{eventOf(g, *end)};
  const int nodes = cur.result.nodeCount;
  if (store_.add(keys_->exitCount(g), 1) >= nodes) {
    store_.set(keys_->exitDone(g), "1");
    // Agents that arrive from now on learn that this job is over.
    const std::string why = "all " + std::to_string(nodes) + " node(s) of generation " +
                            std::to_string(g) + " succeeded";
    store_.compareSet(keys_->ended(), "", encodeJobEnd(jobEndNow(true, g, why)));
  }
  const KeyOrEnd got = awaitKeyOrEnd(keys_->exitDone(g), g, Clock::now() + timeout);
  if (got.found) return AllSucceeded{};
  if (got.end) return RoundEnded{eventOf(g, *got.end)};
  const int64_t arrived = store_.add(keys_->exitCount(g), 0);
  throw TimeoutError("rendezvous '" + settings_.runId + "' generation " + std::to_string(g) +
                     ": exit barrier timed out after " + msText(timeout) + " with " +
                     std::to_string(arrived) + " of " + std::to_string(nodes) + " nodes done");
}

void RoundState::leave() {
  current_.reset();
  if (!member_) return;
  const int64_t g = member_->generation;
  const int rank = member_->result.nodeRank;
  const int nodes = member_->result.nodeCount;
  member_.reset();
  try {
    if (auto ended = peek(store_, keys_->ended())) {
      // A node dropped before the job's last round has nothing to count: that round's members
      // delete the job's keys (and this node's round may be gone already).
      if (decodeJobEnd(*ended).generation == g) finishLeaving(g, nodes);
    } else if (store_.check({keys_->exitDone(g)})) {
      finishLeaving(g, nodes);  // every node passed the exit barrier: the normal end
    } else {
      // The job goes on: the others must re-form without this node.
      store_.append(keys_->gone(g), std::to_string(rank) + "\n");
      endRound(store_, *keys_, g,
               {RendezvousEventKind::kPeerLost,
                self() + " (node rank " + std::to_string(rank) + ") left the job", rank});
      finishLeaving(g, nodes);
    }
    leftGeneration_ = g;
  } catch (const std::exception& e) {
    log_->warn("rendezvous '{}': leaving generation {} failed: {}", settings_.runId, g, e.what());
  }
}

ExclusionClaim RoundState::claimExclusion(const NodeExclusion& exclusion) {
  const Current& cur = requireRound("claimExclusion()");
  return detail::claimExclusion(store_, *keys_, cur.generation, cur.result.nodeCount,
                                settings_.minNodes, exclusion);
}

bool RoundState::sitOut(std::chrono::milliseconds cooldown) {
  const Current cur = requireRound("sitOut()");
  current_.reset();
  member_.reset();  // no leave() counts this round: the job goes on
  const int64_t g = cur.generation;
  const int rank = cur.result.nodeRank;
  store_.append(keys_->gone(g), std::to_string(rank) + "\n");
  endRound(store_, *keys_, g,
           {RendezvousEventKind::kPeerLost,
            self() + " (node rank " + std::to_string(rank) + ") left the job for a cooldown of " +
                durationText(cooldown) + " (bad-node exclusion)",
            rank});
  return waitForAny(store_, {keys_->ended()}, Clock::now() + cooldown, slice_).has_value();
}

void RoundState::markReturned(int64_t generation) {
  if (!keys_) return;
  try {
    markExclusionReturned(store_, *keys_, node_.host, node_.pid, generation);
  } catch (const std::exception& e) {
    log_->warn("rendezvous '{}': marking this node's exclusion returned failed: {}",
               settings_.runId, e.what());
  }
}

void RoundState::finishLeaving(int64_t g, int nodes) {
  // The last node of the round to leave deletes the job's keys (the agent hosting the store
  // waits for that before stopping it).
  if (store_.add(keys_->left(g), 1) < nodes) return;
  // Every node of the round left; a job that did not end (all were stopped) is over now.
  const std::string why = "every node of generation " + std::to_string(g) + " left the job";
  store_.compareSet(keys_->ended(), "", encodeJobEnd(jobEndNow(false, g, why)));
  const JobEnd end = decodeJobEnd(store_.get(keys_->ended()));
  deleteEndedJob(store_, *keys_, end, settings_.maxNodes);
  // Only an agent-hosted store has someone waiting (awaitOthersLeft); ddprund keeps no marker.
  if (peek(store_, RendezvousKeys::owner())) store_.set(keys_->cleaned(), "1");
}

bool RoundState::awaitOthersLeft(std::chrono::milliseconds timeout) {
  if (!leftGeneration_) return true;
  try {
    const auto deadline = Clock::now() + timeout;
    if (waitForAny(store_, {keys_->cleaned()}, deadline, slice_)) return true;
    log_->warn("rendezvous '{}': not every node left generation {} within {}; closing the store "
               "anyway", settings_.runId, *leftGeneration_, msText(timeout));
  } catch (const std::exception& e) {
    log_->warn("rendezvous '{}': waiting for the other nodes to leave failed: {}",
               settings_.runId, e.what());
  }
  return false;
}

}  // namespace ddp::detail
