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

}  // namespace ddp
