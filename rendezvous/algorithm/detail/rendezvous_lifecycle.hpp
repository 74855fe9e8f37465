// The run-id lifecycle: incarnations of a run id, the owner check of an agent-hosted store, and
// deleting the keys of rounds and jobs that ended (layout in rendezvous_keys.hpp).
//
// An incarnation is one job of a run id. Its `ended` tombstone says how it ended; an agent that
// was no part of it moves the run on to the next incarnation with one compareSet (every agent
// racing to do so lands in the same new incarnation). Stragglers of deleted rounds never wait on a
// deleted key: readRoundEnd() (rendezvous_keys.hpp) reads a missing round hint as "ended".
//
// Thread safety: free functions over the Store given (as thread-safe as it is).
#pragma once

#include <cstdint>
#include <optional>
#include <string>

#include "rendezvous/algorithm/detail/rendezvous_keys.hpp"
#include "rendezvous/store/store.hpp"

namespace ddp::detail {

struct IncarnationState {
  int64_t number = 0;
  std::optional<JobEnd> ended;  // set when that job already ended
};

// The run's current incarnation, created as 0 when the run id is new. Two round trips.
IncarnationState readIncarnation(Store& store, const std::string& runId);

// Moves the run from the ended incarnation `ended` to the next one unless another agent already
// did; returns the incarnation now current. One round trip.
int64_t startNextIncarnation(Store& store, const std::string& runId, int64_t ended);

// Whether an agent may join incarnation `keys`.
enum class IncarnationClaim {
  kJoined,  // the incarnation holds this agent's job (or no job yet: now it does)
  kEnded    // it ended meanwhile: read the run's incarnation again
};

// Claims incarnation `keys` for the job `fingerprint` — the first agent's fingerprint is kept —
// or checks the claim. Throws Error naming both jobs (and `self`) when another job holds it: two
// jobs met under one run id on one store; nothing of the running job is touched. An empty
// fingerprint claims nothing and is never refused. One round trip (two on a mismatch).
IncarnationClaim claimIncarnation(Store& store, const RendezvousKeys& keys,
                                  const std::string& fingerprint, const std::string& self);

// Throws Error when the store is hosted by an agent of another run (rdzv/_owner names another
// run id): two jobs meet on one port. One round trip.
void checkStoreOwner(Store& store, const std::string& runId, const std::string& self);

// Deletes every key of round g: 3 per joined slot (join record, assignment, heartbeat) and the
// round's own (roundKeys): O(nodes) round trips. Missing keys are skipped.
void deleteRound(Store& store, const RendezvousKeys& keys, int64_t g, int maxNodes);

// After round `formed` formed with members: deletes the rounds below `previousFormed` (the
// previous formed round stays for its stragglers) and moves `low` on. Never throws: logs.
void deleteRoundsBefore(Store& store, const RendezvousKeys& keys, int64_t previousFormed,
                        int maxNodes);

// The last agent leaving an ended job: deletes every key of the incarnation but its tombstone
// (`ended`, and `failures` when the job failed), and the tombstone of the incarnation before.
void deleteEndedJob(Store& store, const RendezvousKeys& keys, const JobEnd& end, int maxNodes);

}  // namespace ddp::detail
