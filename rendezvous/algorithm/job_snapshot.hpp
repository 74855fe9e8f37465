// JobSnapshot helpers: merging what several agents know of one job, and the keys that carry the
// job on in a fresh rendezvous store (store failover: launcher/rendezvous/store_failover.hpp).
//
// Seeding writes only the run's small durable state (key layout in detail/rendezvous_keys.hpp):
// the incarnation, the round hint and `low` (both the next round number, so the next round is
// generation + 1 and nothing below it is looked for), the restart counter and the failure records.
// No round exists in a seeded store: the survivors join the next round as after a peer loss, and
// since no formed round is recorded the closing rule waits for nobody but min_nodes and the last
// call (rendezvous_close.hpp).
//
// Thread safety: pure functions over values.
#pragma once

#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "rendezvous/algorithm/rendezvous_types.hpp"

namespace ddp {

using StoreKeyValues = std::vector<std::pair<std::string, std::string>>;

// What `a` and `b` know together. Snapshots of another run id, or without an incarnation, add
// nothing; a newer incarnation replaces an older one; within one incarnation: the highest
// generation, the highest restart count, and the union of the failure records
// (each distinct record once, `a`'s first, in order).
JobSnapshot mergeSnapshots(JobSnapshot a, const JobSnapshot& b);

// The keys a fresh store needs so that the job of `s` continues at round s.generation + 1 with
// s.restartsUsed restarts spent and s.failureRecords kept (not the agent-hosted store's owner
// key: the launcher adds that). Empty when s has no incarnation.
StoreKeyValues seedKeys(const JobSnapshot& s);

// One line of text for a snapshot (what a survivor reports to the new host):
// "<incarnation> <generation> <restarts> <run id length>\n<run id><framed failure records>".
std::string encodeSnapshot(const JobSnapshot& s);
// Throws ProtocolError when `value` is not what encodeSnapshot() writes.
JobSnapshot decodeSnapshot(const std::string& value);

// The key an agent-hosted rendezvous store holds from the moment it listens, besides the owner
// key: who hosts it, "<host>|<pid>" of the hosting agent (launcher/rendezvous/store_failover.hpp).
std::string rendezvousHostKey();

}  // namespace ddp
