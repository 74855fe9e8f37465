#include "rendezvous/detail/rendezvous_join.hpp"

#include <algorithm>
#include <cstdint>

#include "rendezvous/logging.hpp"

namespace ddp::detail {

namespace {

std::string ms(std::chrono::milliseconds d) { return std::to_string(d.count()) + " ms"; }

}  // namespace

RoundJoiner::RoundJoiner(Store& store, const RendezvousKeys& keys,
                         const RendezvousSettings& settings, const NodeDescriptor& self,
                         std::chrono::milliseconds slice)
    : store_(store),
      keys_(keys),
      settings_(settings),
      node_(self),
      slice_(slice),
      heartbeatTimeout_(effectiveHeartbeatTimeout(settings)),
      log_(logger("rdzv")) {
  closerToken_ = node_.host + "/" + std::to_string(node_.pid) + "/" +
                 std::to_string(reinterpret_cast<uintptr_t>(this));
}

std::string RoundJoiner::self() const {
  return "node " + node_.host + " (addr " + node_.addr + ", pid " + std::to_string(node_.pid) + ")";
}

JoinedRound RoundJoiner::join(int prevRank) {
  const auto deadline = Clock::now() + settings_.joinTimeout;
  throwIfJobEnded();
  while (true) {
    // A job that ends while we join is seen through the `ended` key the result wait checks.
    const int64_t g = currentRound();
    if (auto joined = tryJoin(g, prevRank, deadline)) return *joined;
  }
}

int64_t RoundJoiner::currentRound() {
  // Only a hint: a round that already ended is closed, so joining it draws a late slot, and the
  // late path moves the hint on (one extra round trip in that rare case, none in the common one).
  return parseCount(keys_.round(), store_.compareSet(keys_.round(), "", "0"));
}

std::optional<JoinedRound> RoundJoiner::tryJoin(int64_t g, int prevRank,
                                                Clock::time_point deadline) {
  const int64_t slot = store_.add(keys_.count(g), 1);
  const bool member = slot < kFrozen && slot <= settings_.maxNodes;
  if (member) {
    store_.set(keys_.node(g, slot), encodeJoinRecord(JoinRecord{slot, prevRank, node_}));
    if (slot == settings_.maxNodes) {
      tryClose(g);
    } else if (slot == settings_.minNodes) {
      lastCall(g, deadline);
    }
  }
  std::optional<RoundMembership> closed = awaitMembership(g, deadline);
  if (!closed) return std::nullopt;  // the round was abandoned; join the next one
  RoundMembership& m = *closed;
  if (!m.error.empty()) throw ConfigError(m.error);
  const bool inRound = member && std::any_of(m.members.begin(), m.members.end(),
                                             [&](const JoinRecord& r) { return r.slot == slot; });
  if (inRound) return JoinedRound{slot, resultFor(std::move(m), slot)};
  handleLate(g, m, deadline);
  return std::nullopt;
}

void RoundJoiner::lastCall(int64_t g, Clock::time_point deadline) {
  const auto until = std::min(deadline, Clock::now() + settings_.lastCallTimeout);
  if (waitForAny(store_, {keys_.closer(g), keys_.ended()}, until, slice_)) return;
  if (Clock::now() < deadline) tryClose(g);
}

void RoundJoiner::tryClose(int64_t g) {
  if (store_.compareSet(keys_.closer(g), "", closerToken_) != closerToken_) return;
  // Freezing the counter decides membership atomically: every add() before this one drew a slot
  // below kFrozen, every later one draws a slot above it and knows it is late.
  const int64_t joined = store_.add(keys_.count(g), kFrozen) - kFrozen;
  const int64_t n = std::min<int64_t>(joined, settings_.maxNodes);
  RoundMembership m;
  m.generation = g;
  m.restartsUsed = static_cast<int>(store_.add(keys_.restarts(), 0));
  try {
    auto records = readJoinRecords(g, n);
    // Too few records left (agents died while joining): an empty round sends everybody on to the
    // next one, as late joiners.
    if (static_cast<int>(records.size()) >= settings_.minNodes) {
      m.members = assignNodeRanks(std::move(records), g);
    }
  } catch (const ConfigError& e) {
    m.error = "rendezvous '" + settings_.runId + "': " + e.what();
  }
  std::vector<std::string> names;
  std::vector<std::string> values;
  for (size_t rank = 0; rank < m.members.size(); ++rank) {
    names.push_back(keys_.heartbeat(g, static_cast<int>(rank)));
    values.push_back("0");
  }
  names.push_back(keys_.result(g));
  values.push_back(encodeMembership(m));
  store_.multiSet(names, values);
  if (!m.error.empty()) {
    store_.set(keys_.ended(), m.error);
    log_->error("{}", m.error);
    return;
  }
  log_->debug("rendezvous '{}' round {} closed with {} node(s) ({} joined)", settings_.runId, g,
             m.members.size(), joined);
}

std::vector<JoinRecord> RoundJoiner::readJoinRecords(int64_t g, int64_t n) {
  std::vector<std::string> names;
  for (int64_t slot = 1; slot <= n; ++slot) names.push_back(keys_.node(g, slot));
  // Records follow their slot at once; only an agent that died between the two never writes
  // one. Wait while records keep arriving; leave out those still missing after a whole
  // heartbeatTimeout without progress.
  std::vector<std::string> missing = names;
  while (!missing.empty()) {
    try {
      store_.wait(missing, heartbeatTimeout_);
      missing.clear();
    } catch (const TimeoutError&) {
      const size_t before = missing.size();
      std::erase_if(missing, [&](const std::string& name) { return store_.check({name}); });
      if (missing.size() < before) continue;
      log_->warn("rendezvous '{}' round {}: {} of {} joined agents never wrote their record",
                 settings_.runId, g, missing.size(), n);
      std::erase_if(names, [&](const std::string& name) {
        return std::find(missing.begin(), missing.end(), name) != missing.end();
      });
      break;
    }
  }
  std::vector<JoinRecord> records;
  if (names.empty()) return records;
  for (const auto& value : store_.multiGet(names)) records.push_back(decodeJoinRecord(value));
  return records;
}

std::optional<RoundMembership> RoundJoiner::awaitMembership(int64_t g,
                                                            Clock::time_point deadline) {
  // Fallbacks, judged on this agent's clock: if minNodes joined long ago and nobody closed (the
  // last-call leader died), close; if the round is being closed but no result appears (the
  // closing agent died), abandon the round so that everybody moves on to the next one.
  const auto closeAfter = settings_.lastCallTimeout + heartbeatTimeout_;
  const auto abandonAfter = 2 * heartbeatTimeout_;
  const Clock::time_point never = Clock::time_point::max();
  Clock::time_point minSeenAt = never;
  Clock::time_point closingSeenAt = never;
  while (true) {
    const auto until = std::min(deadline, Clock::now() + slice_ * 4);
    const auto found =
        waitForAny(store_, {keys_.result(g), keys_.ended(), keys_.end(g)}, until, slice_);
    if (found == 0u) return decodeMembership(store_.get(keys_.result(g)));
    if (found == 1u) throwIfJobEnded();
    if (found == 2u) return std::nullopt;  // abandoned: the round never closed
    if (Clock::now() >= deadline) throwJoinTimeout(g);
    const int64_t count = store_.add(keys_.count(g), 0);
    if (count >= kFrozen || store_.check({keys_.closer(g)})) {
      if (closingSeenAt == never) closingSeenAt = Clock::now();
      if (Clock::now() - closingSeenAt >= abandonAfter) {
        endRound(store_, keys_, g,
                 {RendezvousEventKind::kPeerLost, "the agent closing round " + std::to_string(g) +
                                                      " stopped before publishing it"});
      }
    } else if (count < settings_.minNodes) {
      minSeenAt = never;
    } else if (minSeenAt == never) {
      minSeenAt = Clock::now();
    } else if (Clock::now() - minSeenAt >= closeAfter) {
      tryClose(g);
    }
  }
}

void RoundJoiner::handleLate(int64_t g, const RoundMembership& m, Clock::time_point deadline) {
  const int n = static_cast<int>(m.members.size());
  // A round whose nodes are already passing the exit barrier is finishing: do not restart it.
  const bool finishing = store_.check({keys_.exitCount(g)});
  if (n < settings_.maxNodes && !finishing) {
    const std::string why = self() + " waits to join (round " + std::to_string(g) + " has " +
                            std::to_string(n) + " of at most " +
                            std::to_string(settings_.maxNodes) + " nodes)";
    endRound(store_, keys_, g, {RendezvousEventKind::kScaleUp, why});
    log_->info("rendezvous '{}': {}; asking the running nodes to scale up", settings_.runId, why);
  } else {
    log_->info("rendezvous '{}' round {} is {} ({} nodes); waiting as a spare", settings_.runId,
               g, finishing ? "finishing" : "full", n);
    if (!waitForAny(store_, {keys_.end(g), keys_.ended()}, deadline, slice_)) {
      throw TimeoutError("rendezvous '" + settings_.runId + "': " + self() + " waited " +
                         ms(settings_.joinTimeout) + " (join_timeout) as a spare; round " +
                         std::to_string(g) + " is full (max_nodes=" +
                         std::to_string(settings_.maxNodes) + ") or finishing, and did not end");
    }
  }
  store_.compareSet(keys_.round(), std::to_string(g), std::to_string(g + 1));
}

void RoundJoiner::throwIfJobEnded() {
  if (auto reason = tryGet(store_, keys_.ended())) {
    throw JobEndedError("rendezvous '" + settings_.runId + "': the job already ended: " + *reason,
                        jobSucceeded(*reason));
  }
}

void RoundJoiner::throwJoinTimeout(int64_t g) {
  const int64_t count = store_.add(keys_.count(g), 0);
  const int64_t joined = count >= kFrozen ? count - kFrozen : count;
  throw TimeoutError("rendezvous '" + settings_.runId + "' round " + std::to_string(g) +
                     ": timed out after " + ms(settings_.joinTimeout) + " (join_timeout) with " +
                     std::to_string(joined) + " node(s) joined; min_nodes=" +
                     std::to_string(settings_.minNodes) + ", max_nodes=" +
                     std::to_string(settings_.maxNodes) + " (" + self() + ")");
}

}  // namespace ddp::detail
