#include "rendezvous/algorithm/rendezvous_types.hpp"

namespace ddp {

const char* endName(RendezvousEventKind kind) {
  switch (kind) {
    case RendezvousEventKind::kScaleUp: return "scale-up";
    case RendezvousEventKind::kPeerLost: return "peer lost";
    case RendezvousEventKind::kRestartRequested: return "restart";
    case RendezvousEventKind::kJobFailed: return "job failed";
    case RendezvousEventKind::kStoreLost: return "store lost";
  }
  return "ended";
}

RankLayout layoutOf(const RendezvousResult& round, int localRank, int localWorldSize) {
  return {.rank = round.baseRank + localRank,
          .worldSize = round.worldSize,
          .localRank = localRank,
          .localWorldSize = localWorldSize,
          .groupRank = round.nodeRank,
          .groupWorldSize = round.nodeCount};
}

}  // namespace ddp
