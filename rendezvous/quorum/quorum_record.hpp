// QuorumRecord: one worker's place in the current membership of its job, as its agent tells it
// (in-place recovery, docs/recovery.md).
//
// A *generation* is one rendezvous round (TORCHELASTIC_RESTART_COUNT). Inside a generation, each
// change of the workers' membership that keeps the healthy processes running is a *quorum*
// (torchft's word), numbered from 0 (the membership the round formed with): a worker replaced in
// place makes quorum q + 1 of the same generation; a node lost or added in place makes quorum 0
// of the next generation. (generation, quorum) orders every membership of a job: a worker builds
// its communicator only for the newest it has seen, so there are never two worlds.
//
// Encoding: one JSON object (nlohmann/json) with the fields below under their snake_case names
// (generation, quorum, rank, world_size, local_rank, local_world_size, group_rank,
// group_world_size, master_addr, master_port, reason, replaced); keys a decoder does not know are
// ignored (a newer agent may add some); reason and replaced are optional.
//
// Thread safety: plain values and pure functions.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "rendezvous/base/endpoint.hpp"
#include "rendezvous/base/rank_layout.hpp"

namespace ddp {

struct QuorumId {
  int64_t generation = 0;
  int64_t quorum = 0;
  auto operator<=>(const QuorumId&) const = default;
};

// The worker's RankLayout in this quorum (a worker's local rank never changes), then the rest.
struct QuorumRecord : RankLayout {
  QuorumId id;
  // The worker store of this quorum's generation (MASTER_ADDR / MASTER_PORT; 1..65535).
  Endpoint master;
  // One line: why this quorum exists ("rank 3 (pid 4242) exited with 1: replaced in place").
  std::string reason;
  // Global ranks whose process is new in this quorum (their state comes from a peer).
  std::vector<int> replaced;
  bool operator==(const QuorumRecord&) const = default;
};

// "generation.quorum", for logs and store prefixes: "3.1".
std::string toString(const QuorumId& id);

std::string encodeQuorumRecord(const QuorumRecord& record);
// Throws ProtocolError naming the field when the text is not such an object, a required field is
// missing or of the wrong type, or the ranks are inconsistent (rank >= world_size, ...).
QuorumRecord decodeQuorumRecord(const std::string& text);

}  // namespace ddp
