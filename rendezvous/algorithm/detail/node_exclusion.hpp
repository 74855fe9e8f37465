// Bad-node exclusion over the store (ExclusionBoard: claim, sitOut, markReturned, list,
// count): the claim rule, the job's list of exclusions and its encoding. Keys:
// rendezvous_keys.hpp (`excluded`, `excluded_count`, r/<g>/leaving, r/<g>/spares).
//
// Thread safety: free functions; each makes the store calls it says.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "rendezvous/algorithm/detail/rendezvous_keys.hpp"
#include "rendezvous/algorithm/rendezvous_types.hpp"
#include "rendezvous/store/store.hpp"

namespace ddp::detail {

// One line of JSON. decodeExclusion throws ProtocolError for a line it cannot read.
std::string encodeExclusion(const NodeExclusion& exclusion);
NodeExclusion decodeExclusion(const std::string& line);
// The `excluded` value: one line per exclusion, oldest first. Unreadable lines are skipped.
std::vector<NodeExclusion> decodeExclusions(const std::string& value);

// The claim rule (ExclusionBoard::claim) on round g of `members` nodes: adds this node to
// r/<g>/leaving, reads r/<g>/spares; granted when members - leaving + spares >= minNodes, then the
// exclusion is appended to the job's list (the newest kMaxExclusionsKept) and counted; refused:
// the add is taken back. Three to five store calls, plus compareSet retries on a contended list.
ExclusionClaim claimExclusion(Store& store, const RendezvousKeys& keys, int64_t g, int members,
                              int minNodes, const NodeExclusion& exclusion);

// Sets returnedAt = generation on the newest exclusion of (host, pid) that is still out.
void markExclusionReturned(Store& store, const RendezvousKeys& keys, const std::string& host,
                           int pid, int64_t generation);

}  // namespace ddp::detail
