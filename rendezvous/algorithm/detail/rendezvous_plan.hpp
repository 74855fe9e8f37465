// Round plan: what the closing agent computes once for a closed round, so that every agent reads
// O(1) of it. The closer publishes, in one pass over the roster:
//
//   r/<g>/as/<slot>   for every join slot 1..n of the round: the assignment of the agent that drew
//                     it — the round header, and for a member its place (node rank, base rank,
//                     role ranks) and the hosts of the peers its heartbeat thread watches
//   r/<g>/result      the round header alone (late joiners and spares wait on it), written last
//
// Value layout (text framing of rendezvous_text.hpp):
//
//   header line   <generation> \t <restarts used> \t <node count> \t <world size> \t <error>
//   member line   <node rank> \t <base rank> \t <base role rank> \t <role world size>
//   peer lines    <node rank> \t <host> \t <join slot>   one per watched peer, ascending rank
//
// A result (and the assignment of a slot that is no member: it withdrew, or never wrote its
// record) is the header line alone. A non-empty error means the round could not form
// (ConfigError on every node); such a value has no member line.
//
// Who watches whom (watchedBy): node rank 0 watches every other node (its assignment carries
// N - 1 hosts: O(N) for one agent), every other node watches its successor (rank + 1) mod N, so a
// lost node 0 is seen too.
//
// Thread safety: pure functions over values.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "rendezvous/algorithm/detail/rendezvous_assign.hpp"
#include "rendezvous/algorithm/rendezvous_types.hpp"

namespace ddp::detail {

// The node ranks `rank` watches in a round of `nodeCount` nodes, ascending.
std::vector<int> watchedBy(int rank, int nodeCount);

struct RoundHeader {
  int64_t generation = 0;
  int restartsUsed = 0;
  int nodeCount = 0;
  int worldSize = 0;
  std::string error;  // non-empty: the round could not form
};

struct PeerHost {
  int rank = 0;
  std::string host;
  int64_t slot = 0;  // its join slot in the round (its record: r/<g>/node/<slot>)
};

// A member's place in its round.
struct Placement {
  int nodeRank = 0;
  int baseRank = 0;
  int baseRoleRank = 0;
  int roleWorldSize = 0;
  std::vector<PeerHost> watched;  // watchedBy(nodeRank, nodeCount), with their hosts
};

struct Assignment {
  RoundHeader header;
  std::optional<Placement> member;  // nullopt: no member (or a round that failed to form)
};

std::string encodeAssignment(const Assignment& assignment);
// Throws ProtocolError on malformed input.
Assignment decodeAssignment(const std::string& value);

// Every member's assignment for `roster` (members in node-rank order), keyed by join slot, plus
// the header alone for the result key. O(N).
struct RoundPlan {
  RoundHeader header;
  std::vector<std::pair<int64_t, Assignment>> bySlot;  // members only, in node-rank order
};
RoundPlan planRound(const RoundMembership& roster);

// This node's view of its assignment. Throws ConfigError when the round failed to form and Error
// when the assignment is no member's.
RendezvousResult resultOf(const Assignment& assignment);

}  // namespace ddp::detail
