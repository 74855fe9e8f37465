#include "rendezvous/algorithm/detail/rendezvous_close.hpp"

#include <algorithm>
#include <unordered_set>

#include "rendezvous/algorithm/detail/rendezvous_lifecycle.hpp"
#include "rendezvous/algorithm/detail/rendezvous_plan.hpp"
#include "rendezvous/base/logging.hpp"

namespace ddp::detail {

RoundCloser::RoundCloser(Store& store, const RendezvousSettings& settings, std::string token)
    : store_(store),
      settings_(settings),
      token_(std::move(token)),
      heartbeatTimeout_(effectiveHeartbeatTimeout(settings)),
      log_(logger("rdzv")) {}

std::optional<int64_t> RoundCloser::previousFormed(const RendezvousKeys& keys) {
  const auto value = peek(store_, keys.formed());
  if (!value) return std::nullopt;
  return parseCount(keys.formed(), *value);
}

void RoundCloser::resetFor(const RendezvousKeys& keys, int64_t g) {
  incarnation_ = keys.incarnation();
  round_ = g;
  seenSlots_ = 0;
  live_ = 0;
  pending_.clear();
  previous_ = previousFormed(keys);
  if (!previous_ || *previous_ >= g) {
    previous_.reset();
    return;
  }
  // The one O(N) read of the previous round, once per round and evaluating agent (the leader).
  const auto roster = peek(store_, keys.roster(*previous_));
  if (!roster) return;  // deleted meanwhile: nobody to wait for
  const RoundMembership m = decodeMembership(*roster);
  for (size_t rank = 0; rank < m.members.size(); ++rank) {
    pending_.push_back(Pending{static_cast<int>(rank), m.members[rank].node.host, "", {}, false});
  }
  // The previous round ended before this one opened: a node it declared lost stays gone.
  if (auto end = peek(store_, keys.end(*previous_))) dropRanks({decodeRoundEnd(*end).lostRank});
}

void RoundCloser::dropRanks(const std::vector<int>& ranks) {
  std::erase_if(pending_, [&](const Pending& p) {
    return std::find(ranks.begin(), ranks.end(), p.rank) != ranks.end();
  });
}

void RoundCloser::noteRecord(const std::string& value) {
  if (!isLiveRecord(value)) return;
  ++live_;
  const JoinRecord record = decodeJoinRecord(value);
  if (previous_ && record.prevGeneration == *previous_) dropRanks({record.prevRank});
}

void RoundCloser::readNewRecords(const RendezvousKeys& keys, int64_t g, int64_t upTo) {
  if (upTo <= seenSlots_) return;
  std::vector<std::string> names;
  for (int64_t slot = seenSlots_ + 1; slot <= upTo; ++slot) names.push_back(keys.node(g, slot));
  if (checkAll(store_, names)) {
    for (const auto& value : multiGetAll(store_, names)) noteRecord(value);
    seenSlots_ = upTo;
    return;
  }
  // A record follows its slot at once; read up to the first one not written yet.
  for (const auto& name : names) {
    const auto value = peek(store_, name);
    if (!value) return;
    noteRecord(*value);
    ++seenSlots_;
  }
}

void RoundCloser::dropSilent(const RendezvousKeys& keys) {
  std::vector<std::string> names;
  for (const auto& p : pending_) names.push_back(keys.heartbeat(*previous_, p.rank));
  if (!checkAll(store_, names)) {  // the previous round's keys are gone: so are its members
    pending_.clear();
    return;
  }
  const auto values = multiGetAll(store_, names);
  const auto now = Clock::now();
  for (size_t i = 0; i < pending_.size(); ++i) {
    Pending& p = pending_[i];
    if (!p.observed || values[i] != p.beat) {
      p.observed = true;
      p.beat = values[i];
      p.since = now;
    }
  }
  std::erase_if(pending_, [&](const Pending& p) { return now - p.since >= heartbeatTimeout_; });
}

CloseReadiness RoundCloser::readiness(const RendezvousKeys& keys, int64_t g, int64_t count) {
  if (keys.incarnation() != incarnation_ || g != round_) resetFor(keys, g);
  readNewRecords(keys, g, std::min<int64_t>(count, settings_.maxNodes));
  if (!pending_.empty()) {
    if (auto gone = peek(store_, keys.gone(*previous_))) dropRanks(decodeGone(*gone));
  }
  if (!pending_.empty()) dropSilent(keys);
  CloseReadiness r;
  r.live = live_;
  for (const auto& p : pending_) {
    r.awaited.push_back("node rank " + std::to_string(p.rank) + " (" + p.host + ")");
  }
  r.ready = live_ >= settings_.minNodes && pending_.empty();
  r.hasPrevious = previous_.has_value();
  return r;
}

void RoundCloser::tryClose(const RendezvousKeys& keys, int64_t g) {
  if (store_.compareSet(keys.closer(g), "", token_) != token_) return;
  const int64_t joined = store_.add(keys.count(g), kFrozen) - kFrozen;
  const int64_t n = std::min<int64_t>(joined, settings_.maxNodes);
  const std::optional<int64_t> previous = previousFormed(keys);
  RoundMembership m;
  m.generation = g;
  m.restartsUsed = static_cast<int>(store_.add(keys.restarts(), 0));
  try {
    auto records = readJoinRecords(keys, g, n);
    // Only members of the previous formed round keep their place; the others rejoin as newcomers.
    for (auto& record : records) {
      if (!previous || record.prevGeneration != *previous) record.prevRank = -1;
    }
    // Too few records left (agents died or withdrew while joining): an empty round sends
    // everybody on to the next one, as late joiners.
    if (static_cast<int>(records.size()) >= settings_.minNodes) {
      m.members = assignNodeRanks(std::move(records), g);
    }
  } catch (const ConfigError& e) {
    m.error = "rendezvous '" + settings_.runId + "': " + e.what();
  }
  publish(keys, m, n);
  if (!m.error.empty()) {
    store_.compareSet(keys.ended(), "", encodeJobEnd(jobEndNow(false, g, m.error)));
    log_->error("{}", m.error);
    return;
  }
  log_->debug("rendezvous '{}' round {} closed with {} node(s) ({} joined)", settings_.runId, g,
              m.members.size(), joined);
  if (!m.members.empty() && previous) {
    deleteRoundsBefore(store_, keys, *previous, settings_.maxNodes);
  }
}

void RoundCloser::publish(const RendezvousKeys& keys, const RoundMembership& m, int64_t slots) {
  const int64_t g = m.generation;
  const RoundPlan plan = planRound(m);
  std::vector<std::string> names;
  std::vector<std::string> values;
  const size_t total = m.members.size() + 2 + static_cast<size_t>(slots) + 1;
  names.reserve(total);
  values.reserve(total);
  auto put = [&](std::string name, std::string value) {
    names.push_back(std::move(name));
    values.push_back(std::move(value));
  };
  // In the order agents may need them (a multiSet longer than kKeysPerRequest is not atomic):
  // first what members read once they run, then the assignments they wait on, the result last.
  for (size_t rank = 0; rank < m.members.size(); ++rank) {
    put(keys.heartbeat(g, static_cast<int>(rank)), std::string(kNoHeartbeatYet));
  }
  if (!m.members.empty()) {
    put(keys.roster(g), encodeMembership(m));
    put(keys.formed(), std::to_string(g));
  }
  // Every slot 1..slots gets an assignment: the members theirs, the others (withdrawn, no record)
  // the header alone, so that every agent holding a slot waits on its own key only.
  const std::string header = encodeAssignment(Assignment{plan.header, std::nullopt});
  const size_t first = names.size();
  for (int64_t slot = 1; slot <= slots; ++slot) put(keys.assignment(g, slot), header);
  for (const auto& [slot, assignment] : plan.bySlot) {
    values.at(first + static_cast<size_t>(slot - 1)) = encodeAssignment(assignment);
  }
  put(keys.result(g), header);  // last: whoever sees it finds everything above
  multiSetAll(store_, names, values);
}

std::vector<JoinRecord> RoundCloser::readJoinRecords(const RendezvousKeys& keys, int64_t g,
                                                     int64_t n) {
  std::vector<std::string> names;
  for (int64_t slot = 1; slot <= n; ++slot) names.push_back(keys.node(g, slot));
  // Records follow their slot at once; only an agent that died between the two never writes
  // one. Wait while records keep arriving; leave out those still missing after a whole
  // heartbeatTimeout without progress.
  std::unordered_set<std::string> missing;
  for (size_t from = 0; from < names.size(); from += kKeysPerRequest) {
    const auto to = std::min(names.size(), from + kKeysPerRequest);
    for (auto& name : awaitRecords({names.begin() + from, names.begin() + to})) {
      missing.insert(std::move(name));
    }
  }
  if (!missing.empty()) {
    log_->warn("rendezvous '{}' round {}: {} of {} joined agents never wrote their record",
               settings_.runId, g, missing.size(), n);
    std::erase_if(names, [&](const std::string& name) { return missing.count(name) > 0; });
  }
  std::vector<JoinRecord> records;
  if (names.empty()) return records;
  for (const auto& value : multiGetAll(store_, names)) {
    if (isLiveRecord(value)) records.push_back(decodeJoinRecord(value));
  }
  return records;
}

std::vector<std::string> RoundCloser::awaitRecords(std::vector<std::string> missing) {
  while (!missing.empty()) {
    try {
      store_.wait(missing, heartbeatTimeout_);
      return {};
    } catch (const TimeoutError&) {
      const size_t before = missing.size();
      std::erase_if(missing, [&](const std::string& name) { return store_.check({name}); });
      if (missing.size() == before) return missing;
    }
  }
  return missing;
}

}  // namespace ddp::detail
