// RankLayout: where one worker sits in its job — its rank in the world, on its node, and its
// node's rank, with the size of each — the six numbers torchrun exports as RANK, WORLD_SIZE,
// LOCAL_RANK, LOCAL_WORLD_SIZE, GROUP_RANK and GROUP_WORLD_SIZE. Each place that says where a
// worker sits embeds it, so that one is assigned from another in one statement
// (`spec.layout() = layoutOf(round, ...)`, `failure.layout() = spec.layout()`):
//   worker_runtime  WorkerEnv (worker_env.hpp), GroupView (elastic_group.hpp)
//   rendezvous      QuorumRecord (quorum/quorum_record.hpp), RankStep (http/http_steps.hpp);
//                   algorithm/rendezvous_types.hpp's layoutOf() makes one from a round
//   launcher        WorkerSpec (workers/worker_env_builder.hpp), WorkerState
//                   (workers/worker_group.hpp), WorkerFailure (failures/failure_summary.hpp),
//                   LogPrefixValues (config/log_prefix.hpp)
// Each keeps its own serialisation (env names, JSON keys, log text) and says which of the six
// numbers it knows.
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
