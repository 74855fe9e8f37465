#include "rendezvous/algorithm/detail/rendezvous_join.hpp"

#include <algorithm>
#include <cstdint>

#include "rendezvous/algorithm/detail/rendezvous_text.hpp"
#include "rendezvous/base/duration_text.hpp"
#include "rendezvous/base/logging.hpp"
#include "rendezvous/store/connection_hooks.hpp"

namespace ddp::detail {

namespace {

constexpr Clock::time_point kNever = Clock::time_point::max();


// How often a waiting agent says what it waits for: every 5 s, more often for short budgets.
std::chrono::milliseconds progressEvery(const RendezvousSettings& s) {
  return std::clamp<std::chrono::milliseconds>(s.joinTimeout / 4, std::chrono::seconds(1),
                                               std::chrono::seconds(5));
}

// How often a waiting agent that is not the last-call leader looks at its round (the header says
// why): about twice per heartbeatTimeout, at least every progress interval, and never so often
// that the waiters of a max_nodes round make more than ~1000 looks per second in all.
std::chrono::milliseconds pollPeriod(const RendezvousSettings& s, std::chrono::milliseconds slice,
                                     std::chrono::milliseconds heartbeatTimeout) {
  const auto base = std::min(progressEvery(s), std::max(slice * 4, heartbeatTimeout / 2));
  return std::max(base, std::chrono::milliseconds(s.maxNodes));
}

// closeOnceAccounted: how often the last-call leader looks while previous members rejoin.
constexpr std::chrono::milliseconds kAccountedLook{20};

std::string closerToken(const NodeDescriptor& node, const void* self) {
  return node.host + "/" + std::to_string(node.pid) + "/" +
         std::to_string(reinterpret_cast<uintptr_t>(self));
}

}  // namespace

RoundJoiner::RoundJoiner(Store& store, const RendezvousSettings& settings,
                         const NodeDescriptor& self, std::chrono::milliseconds slice)
    : store_(store),
      settings_(settings),
      node_(self),
      slice_(slice),
      heartbeatTimeout_(effectiveHeartbeatTimeout(settings)),
      pollEvery_(pollPeriod(settings, slice, heartbeatTimeout_)),
      closer_(store, settings, closerToken(self, this)),
      log_(logger("rdzv")) {}

std::string RoundJoiner::self() const {
  return "node " + node_.host + " (addr " + node_.addr + ", pid " + std::to_string(node_.pid) + ")";
}

JoinOutcome RoundJoiner::join(const RendezvousKeys& keys, MemberHistory history) {
  const auto deadline = Clock::now() + settings_.joinTimeout;
  nextProgress_ = Clock::now() + progressEvery(settings_);
  // The caller just read the job's `ended` state; later rounds check it again.
  for (bool first = true;; first = false) {
    if (!first && store_.check({keys.ended()})) return IncarnationOver{};
    Attempt a{currentRound(keys), 0, "", deadline, history};
    Step step = tryJoin(keys, std::move(a));
    if (auto* joined = std::get_if<JoinedRound>(&step)) return std::move(*joined);
    if (std::holds_alternative<IncarnationOver>(step)) return IncarnationOver{};
  }
}

int64_t RoundJoiner::currentRound(const RendezvousKeys& keys) {
  // Only a hint: a round that already ended is closed, so joining it draws a late slot, and the
  // late path moves the hint on (one extra round trip in that rare case, none in the common one).
  return parseCount(keys.round(), store_.compareSet(keys.round(), "", "0"));
}

void RoundJoiner::withdrawOnClose(const std::string& key, const std::string& record) {
  auto* hooks = dynamic_cast<ConnectionHooks*>(&store_);
  if (hooks == nullptr || !hooks->onCloseSupported()) return;
  try {
    // One registration at a time: the previous round's record no longer matters.
    if (!armedRecord_.empty()) hooks->clearOnClose({armedRecord_});
    armedRecord_.clear();
    hooks->armOnClose(key, record, std::string(kDied));
    armedRecord_ = key;
  } catch (const ProtocolError& e) {  // refused: the join goes on without it
    log_->debug("rendezvous '{}': no ON_CLOSE for the join record {}: {}", settings_.runId, key,
                e.what());
  }
}

RoundJoiner::Step RoundJoiner::tryJoin(const RendezvousKeys& keys, Attempt a) {
  lastReadiness_ = CloseReadiness{};
  const int64_t slot = store_.add(keys.count(a.g), 1);
  if (slot < kFrozen && slot <= settings_.maxNodes) {
    a.slot = slot;
    a.record = encodeJoinRecord(JoinRecord{slot, a.history.rank, a.history.generation, node_});
    // ON_CLOSE first: once the record is visible, this agent's death withdraws it.
    withdrawOnClose(keys.node(a.g, slot), a.record);
    store_.set(keys.node(a.g, slot), a.record);
    if (slot == settings_.maxNodes) closer_.tryClose(keys, a.g);
  }
  Wait waited = awaitMembership(keys, a);
  if (std::holds_alternative<IncarnationOver>(waited)) return IncarnationOver{};
  if (std::holds_alternative<Abandoned>(waited)) return NextRound{};
  Assignment& m = std::get<Assignment>(waited);
  if (!m.header.error.empty()) throw ConfigError(m.header.error);
  if (m.member) return JoinedRound{a.slot, resultOf(m), std::move(m.member->watched)};
  return handleLate(keys, a.g, m.header.nodeCount, a.deadline);
}

std::optional<std::string> RoundJoiner::awaitKey(const std::string& key, Clock::time_point until) {
  const auto left = remaining(until);
  if (left.count() > 0) {
    try {
      store_.wait({key}, left);
    } catch (const TimeoutError&) {
      return std::nullopt;
    }
  }
  return peek(store_, key);
}

RoundJoiner::Wait RoundJoiner::awaitMembership(const RendezvousKeys& keys, const Attempt& a) {
  // Fallback, judged on this agent's clock: if the round is being closed but no result appears
  // (the closing agent died), abandon it so that everybody moves on to the next one.
  const auto abandonAfter = 2 * heartbeatTimeout_;
  const bool leader = a.slot == settings_.minNodes;
  // One key per agent, written once by the closer: its own assignment (every slot gets one), or,
  // late, the round's result. Between looks at the round nothing else is read: the leader looks
  // every 4 slices (its last call), the others every pollEvery_ (a job that ended, a round
  // abandoned, a closer that died, progress logs), so that N waiters cost O(N) requests per
  // pollEvery_, not per slice.
  const std::string mine = a.slot > 0 ? keys.assignment(a.g, a.slot) : keys.result(a.g);
  const auto period = leader ? slice_ * 4 : pollEvery_;
  Clock::time_point minSeenAt = leader ? Clock::now() : kNever;
  Clock::time_point closingSeenAt = kNever;
  // closeOnceAccounted: the leader's first look comes at once (the round may be ready already);
  // considerClosing() keeps later ones short while a previous round's members rejoin.
  const auto firstLook = leader && settings_.closeOnceAccounted ? kAccountedLook : period;
  Clock::time_point lookAgain = std::min(
      Clock::now() + firstLook, leader ? minSeenAt + settings_.lastCallTimeout : kNever);
  while (true) {
    if (auto value = awaitKey(mine, std::min(a.deadline, lookAgain))) {
      return decodeAssignment(*value);
    }
    if (store_.check({keys.ended()})) return IncarnationOver{};
    if (store_.check({keys.end(a.g)})) return Abandoned{};
    if (Clock::now() >= a.deadline) return withdraw(keys, a);
    const int64_t count = store_.add(keys.count(a.g), 0);
    lookAgain = Clock::now() + period;
    if (count >= kFrozen || store_.check({keys.closer(a.g)})) {
      if (closingSeenAt == kNever) closingSeenAt = Clock::now();
      if (Clock::now() - closingSeenAt >= abandonAfter) {
        endRound(store_, keys, a.g,
                 {RendezvousEventKind::kPeerLost, "the agent closing round " +
                                                      std::to_string(a.g) +
                                                      " stopped before publishing it"});
      }
    } else {
      lookAgain = std::min(lookAgain, considerClosing(keys, a, count, minSeenAt));
    }
    logProgress(a, count, minSeenAt);
  }
}

Clock::time_point RoundJoiner::considerClosing(const RendezvousKeys& keys, const Attempt& a,
                                               int64_t count, Clock::time_point& minSeenAt) {
  const auto now = Clock::now();
  if (count < settings_.minNodes) {
    minSeenAt = kNever;
    return kNever;
  }
  if (minSeenAt == kNever) minSeenAt = now;
  // The leader closes after the last call; the others only if it seems gone, one after the
  // other (backupRank). All apply the closing rule; the leader tracks it from the start, so that
  // the silence of a previous member is timed from the first look.
  const bool leader = a.slot == settings_.minNodes;
  const int64_t joined = std::min<int64_t>(count, settings_.maxNodes);
  const auto closeAt =
      minSeenAt + settings_.lastCallTimeout + heartbeatTimeout_ * backupRank(a.slot, joined);
  if (!leader && now < closeAt) return closeAt;
  lastReadiness_ = closer_.readiness(keys, a.g, count);
  if (settings_.closeOnceAccounted && leader && lastReadiness_.hasPrevious) {
    // Everybody of the previous round is back or gone: close now. Else look again soon (the
    // leader's looks are O(1) each: readiness() reads only what changed).
    if (lastReadiness_.ready) {
      closer_.tryClose(keys, a.g);
      return now + slice_;
    }
    return std::min(closeAt, now + std::min<std::chrono::milliseconds>(slice_, kAccountedLook));
  }
  if (now < closeAt) return closeAt;
  if (lastReadiness_.ready) closer_.tryClose(keys, a.g);
  return now + slice_;
}

int64_t RoundJoiner::backupRank(int64_t slot, int64_t joined) const {
  // Slots after the leader's, cyclically over the joined slots (1, 2, ...); a late agent last.
  // Only the first kBackups take over one heartbeatTimeout apart; everybody else waits for one
  // more, so that a dead leader makes O(1) agents, not all N, read the join records and the
  // previous roster.
  const int64_t leaderSlot = settings_.minNodes;
  int64_t b = slot == 0 ? joined : (slot - leaderSlot + joined) % std::max<int64_t>(joined, 1);
  if (slot == leaderSlot) b = 0;
  return std::min<int64_t>(b, kBackups + 1);
}

RoundJoiner::Wait RoundJoiner::withdraw(const RendezvousKeys& keys, const Attempt& a) {
  if (a.slot == 0) throwJoinTimeout(keys, a.g, false);
  store_.compareSet(keys.node(a.g, a.slot), a.record, std::string(kWithdrawn));
  if (store_.add(keys.count(a.g), 0) >= kFrozen) {
    // The round froze before the record was withdrawn: the closer may have counted it, and its
    // assignment decides.
    const std::string mine = keys.assignment(a.g, a.slot);
    const auto until = Clock::now() + settings_.closeTimeout;
    const auto found = waitForAny(store_, {mine, keys.end(a.g), keys.ended()}, until, slice_);
    if (found == 0u) {
      Assignment m = decodeAssignment(store_.get(mine));
      if (m.member || !m.header.error.empty()) {
        log_->info("rendezvous '{}' round {} closed with this node as its join timed out; "
                   "staying", settings_.runId, a.g);
        return m;
      }
    }
  }
  markGone(keys, a.history);
  throwJoinTimeout(keys, a.g, true);
}

void RoundJoiner::markGone(const RendezvousKeys& keys, const MemberHistory& history) {
  // Only the previous formed round is waited on (and still has keys).
  if (history.generation < 0) return;
  const auto formed = peek(store_, keys.formed());
  if (!formed || parseCount(keys.formed(), *formed) != history.generation) return;
  store_.append(keys.gone(history.generation), std::to_string(history.rank) + "\n");
}

RoundJoiner::Step RoundJoiner::handleLate(const RendezvousKeys& keys, int64_t g, int n,
                                          Clock::time_point deadline) {
  // A round whose nodes are already passing the exit barrier is finishing: do not restart it.
  const bool finishing = store_.check({keys.exitCount(g)});
  if (n < settings_.maxNodes && !finishing) {
    const std::string why = self() + " waits to join (round " + std::to_string(g) + " has " +
                            std::to_string(n) + " of at most " +
                            std::to_string(settings_.maxNodes) + " nodes)";
    endRound(store_, keys, g, {RendezvousEventKind::kScaleUp, why});
    log_->info("rendezvous '{}': {}; asking the running nodes to scale up", settings_.runId, why);
  } else {
    log_->info("rendezvous '{}' round {} is {} ({} nodes); waiting as a spare", settings_.runId,
               g, finishing ? "finishing" : "full", n);
    // Counted for bad-node exclusion (node_exclusion.hpp): a spare takes a place next round.
    if (!finishing) store_.add(keys.spares(g), 1);
    const auto found = waitForAny(store_, {keys.end(g), keys.ended()}, deadline, slice_);
    if (!found) {
      if (!finishing) store_.add(keys.spares(g), -1);
      throw TimeoutError("rendezvous '" + settings_.runId + "': " + self() + " waited " +
                         msText(settings_.joinTimeout) + " (join_timeout) as a spare; round " +
                         std::to_string(g) + " is full (max_nodes=" +
                         std::to_string(settings_.maxNodes) + ") or finishing, and did not end");
    }
    if (*found == 1) return IncarnationOver{};
  }
  store_.compareSet(keys.round(), std::to_string(g), std::to_string(g + 1));
  return NextRound{};
}

void RoundJoiner::logProgress(const Attempt& a, int64_t count, Clock::time_point minSeenAt) {
  const auto now = Clock::now();
  if (now < nextProgress_) return;
  nextProgress_ = now + progressEvery(settings_);
  const int64_t joined = count >= kFrozen ? count - kFrozen : count;
  const auto lastCallEnds = minSeenAt == kNever ? kNever : minSeenAt + settings_.lastCallTimeout;
  std::string what;
  if (count >= kFrozen) {
    what = "the closing agent to publish the round";
  } else if (joined < settings_.minNodes) {
    what = "min_nodes=" + std::to_string(settings_.minNodes) + " nodes to join";
  } else if (a.slot == settings_.minNodes && now < lastCallEnds) {
    what = "the last call (" + durationText(std::chrono::duration_cast<std::chrono::milliseconds>(lastCallEnds - now)) + " left)";
  } else if (!lastReadiness_.awaited.empty()) {
    std::string who;
    for (const auto& w : lastReadiness_.awaited) who += (who.empty() ? "" : ", ") + w;
    what = who + " of the previous round to rejoin or be declared lost";
  } else {
    what = "the round to close";
  }
  log_->info("rendezvous '{}' round {}: waiting for {}; {} node(s) joined (min {}, max {}); {} "
             "left of join_timeout", settings_.runId, a.g, what, joined, settings_.minNodes,
             settings_.maxNodes, durationText(std::chrono::duration_cast<std::chrono::milliseconds>(a.deadline - now)));
}

void RoundJoiner::throwJoinTimeout(const RendezvousKeys& keys, int64_t g, bool withdrew) {
  const int64_t count = store_.add(keys.count(g), 0);
  const int64_t joined = count >= kFrozen ? count - kFrozen : count;
  throw TimeoutError("rendezvous '" + settings_.runId + "' round " + std::to_string(g) +
                     ": timed out after " + msText(settings_.joinTimeout) + " (join_timeout) with " +
                     std::to_string(joined) + " node(s) joined; min_nodes=" +
                     std::to_string(settings_.minNodes) + ", max_nodes=" +
                     std::to_string(settings_.maxNodes) + " (" + self() + ")" +
                     (withdrew ? "; this node withdrew its join and is a member of no later round"
                               : ""));
}

}  // namespace ddp::detail
