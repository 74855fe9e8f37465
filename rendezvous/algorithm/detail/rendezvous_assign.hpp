// Round membership: the join record each agent writes, node-rank assignment (pure), and the
// round's roster (every member in node-rank order) that the closing agent publishes once, for the
// closer of the next round only (its closing rule waits for the previous members). What each
// agent reads of a round is its own assignment (rendezvous_plan.hpp), never the roster.
//
// Node rank rule (deterministic for a given membership):
//   1. a node that requested a rank (--node-rank) gets exactly that rank; a requested rank outside
//      [0, nodes) or requested twice is a ConfigError that fails the job with a clear message;
//   2. the remaining ranks go, in ascending order, to the remaining nodes sorted by
//      (NodeDescriptor::order — nodes without one after those with one —, node rank in the
//      previous formed round — newcomers after every returning node —, host, addr, pid). So ranks
//      stay stable across restarts and scale events, survivors of a loss are renumbered compactly
//      in their old order, an elastic Slurm job orders nodes by SLURM_NODEID, and a fresh job
//      otherwise orders nodes by (host, addr, pid). The closer clears prevRank of agents whose
//      last round is not the previous formed one (they rejoin as newcomers).
// Global ranks are contiguous per node: baseRank of node k = sum of localWorldSize of ranks < k.
//
// Thread safety: pure functions over values.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "rendezvous/algorithm/rendezvous_types.hpp"

namespace ddp::detail {

// What an agent writes at r/<g>/node/<slot> when it joins round g.
struct JoinRecord {
  int64_t slot = 0;             // 1-based join order within the round
  int prevRank = -1;            // node rank in the last round this agent was a member of, or -1
  int64_t prevGeneration = -1;  // that round's generation (same incarnation), or -1
  NodeDescriptor node;
};

std::string encodeJoinRecord(const JoinRecord& record);
// Throws ProtocolError on malformed input.
JoinRecord decodeJoinRecord(const std::string& value);

// A closed round's roster as published at r/<g>/roster (an error too, while the closer holds it).
struct RoundMembership {
  int64_t generation = 0;
  int restartsUsed = 0;
  std::string error;               // non-empty: the round could not be formed (ConfigError)
  std::vector<JoinRecord> members;  // in node-rank order
};

std::string encodeMembership(const RoundMembership& membership);
// Throws ProtocolError on malformed input.
RoundMembership decodeMembership(const std::string& value);

// Orders `joined` by the node rank rule above. Throws ConfigError on conflicting requests.
std::vector<JoinRecord> assignNodeRanks(std::vector<JoinRecord> joined, int64_t generation);

}  // namespace ddp::detail
