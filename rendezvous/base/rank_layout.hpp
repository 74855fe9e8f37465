// RankLayout: where one worker sits in its job — its rank in the world, on its node, and its
// node's rank, with the size of each — the six numbers torchrun exports as RANK, WORLD_SIZE,
// LOCAL_RANK, LOCAL_WORLD_SIZE, GROUP_RANK and GROUP_WORLD_SIZE. The worker's environment
// (worker_runtime/worker_env.hpp), the quorum record an agent publishes (quorum/quorum_record.hpp)
// and what a running worker sees of its group (worker_runtime/elastic_group.hpp) each embed it,
// so that one is assigned from another in one statement. Each keeps its own serialisation (env
// names, JSON keys).
//
// Thread safety: a plain value.
#pragma once

namespace ddp {

struct RankLayout {
  int rank = 0;            // RANK: 0 <= rank < worldSize
  int worldSize = 1;       // WORLD_SIZE: workers in the job
  int localRank = 0;       // LOCAL_RANK: 0 <= localRank < localWorldSize
  int localWorldSize = 1;  // LOCAL_WORLD_SIZE: workers on this node
  int groupRank = 0;       // GROUP_RANK: the node's rank
  int groupWorldSize = 1;  // GROUP_WORLD_SIZE: nodes
  bool operator==(const RankLayout&) const = default;

  // This value itself, to assign or compare the layout part of a struct that embeds it.
  RankLayout& layout() { return *this; }
  const RankLayout& layout() const { return *this; }
};

}  // namespace ddp
