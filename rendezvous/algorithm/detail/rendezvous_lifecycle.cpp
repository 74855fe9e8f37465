#include "rendezvous/algorithm/detail/rendezvous_lifecycle.hpp"

#include <algorithm>

#include "rendezvous/algorithm/detail/round_records.hpp"
#include "rendezvous/base/logging.hpp"

namespace ddp::detail {

namespace {

int64_t joinedSlots(Store& store, const RendezvousKeys& keys, int64_t g, int maxNodes) {
  const auto count = peek(store, keys.count(g));
  if (!count) return 0;
  int64_t joined = parseCount(keys.count(g), *count);
  if (joined >= kFrozen) joined -= kFrozen;
  return std::clamp<int64_t>(joined, 0, maxNodes);
}

}  // namespace

IncarnationState readIncarnation(Store& store, const std::string& runId) {
  const std::string key = RendezvousKeys::incarnationOf(runId);
  IncarnationState state;
  state.number = parseCount(key, store.compareSet(key, "", "0"));
  const RendezvousKeys keys(runId, state.number);
  if (auto ended = peek(store, keys.ended())) state.ended = decodeJobEnd(*ended);
  return state;
}

int64_t startNextIncarnation(Store& store, const std::string& runId, int64_t ended) {
  const std::string key = RendezvousKeys::incarnationOf(runId);
  return parseCount(key, store.compareSet(key, std::to_string(ended), std::to_string(ended + 1)));
}

IncarnationClaim claimIncarnation(Store& store, const RendezvousKeys& keys,
                                  const std::string& fingerprint, const std::string& self) {
  if (fingerprint.empty()) return IncarnationClaim::kJoined;
  const std::string held = store.compareSet(keys.job(), "", fingerprint);
  if (held == fingerprint) return IncarnationClaim::kJoined;
  // The job holding it may have ended since the caller looked: its id is free again.
  if (store.check({keys.ended()})) return IncarnationClaim::kEnded;
  throw Error("rendezvous '" + keys.runId() + "': another job is running under this run id on "
              "this rendezvous store (it runs: " + held + "; this one: " + fingerprint +
              "); give each job its own --rdzv-id (or PET_RDZV_ID), or start this one after "
              "the other ended (" + self + ")");
}

void checkStoreOwner(Store& store, const std::string& runId, const std::string& self) {
  const auto owner = peek(store, RendezvousKeys::owner());
  if (!owner || *owner == runId) return;
  throw Error("rendezvous '" + runId + "': the rendezvous store belongs to run '" + *owner +
              "' (its agent hosts it), not to this run: another job uses the same port; under "
              "Slurm two jobs' derived ports collided — set DDP_SLURM_PORT to a free port for "
              "one of them, or pass --rdzv-endpoint (" + self + ")");
}

void deleteRound(Store& store, const RendezvousKeys& keys, int64_t g, int maxNodes) {
  // A round has at most as many members (node ranks) as joined slots.
  const int64_t slots = joinedSlots(store, keys, g, maxNodes);
  for (int64_t slot = 1; slot <= slots; ++slot) {
    store.deleteKey(keys.node(g, slot));
    store.deleteKey(keys.assignment(g, slot));
    store.deleteKey(keys.heartbeat(g, static_cast<int>(slot - 1)));
    store.deleteKey(keys.status(g, static_cast<int>(slot - 1)));
  }
  deleteRoundRecords(store, keys, g, static_cast<size_t>(slots));
  for (const auto& key : keys.roundKeys(g)) store.deleteKey(key);
}

void deleteRoundsBefore(Store& store, const RendezvousKeys& keys, int64_t previousFormed,
                        int maxNodes) {
  try {
    const auto lowValue = peek(store, keys.low());
    const int64_t low = lowValue ? parseCount(keys.low(), *lowValue) : 0;
    for (int64_t g = low; g < previousFormed; ++g) deleteRound(store, keys, g, maxNodes);
    if (previousFormed > low) {
      store.compareSet(keys.low(), lowValue.value_or(""), std::to_string(previousFormed));
    }
  } catch (const std::exception& e) {
    logger("rdzv")->warn("rendezvous '{}': deleting the keys of old rounds failed: {}",
                         keys.runId(), e.what());
  }
}

void deleteEndedJob(Store& store, const RendezvousKeys& keys, const JobEnd& end, int maxNodes) {
  const auto lowValue = peek(store, keys.low());
  const auto hintValue = peek(store, keys.round());
  const int64_t low = lowValue ? parseCount(keys.low(), *lowValue) : 0;
  const int64_t last = hintValue ? parseCount(keys.round(), *hintValue) : low;
  for (int64_t g = low; g <= last; ++g) deleteRound(store, keys, g, maxNodes);
  for (const auto& key : {keys.restarts(), keys.formed(), keys.low(), keys.metrics(), keys.job()}) {
    store.deleteKey(key);
  }
  if (end.succeeded) store.deleteKey(keys.failures());
  if (keys.incarnation() > 0) {
    const RendezvousKeys before(keys.runId(), keys.incarnation() - 1);
    store.deleteKey(before.ended());
    store.deleteKey(before.failures());
    store.deleteKey(before.history());
    store.deleteKey(before.exclusions());
    store.deleteKey(before.exclusionCount());
  }
  // Last: a missing hint tells stragglers that the job's keys are gone.
  store.deleteKey(keys.round());
}

}  // namespace ddp::detail
