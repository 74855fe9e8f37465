// Worker store keys that ddprun agents and worker_runtime share (the worker store itself:
// docs/running.md#worker-environment-exactly-torchruns). Workers' own keys live under
// "/worker/attempt_<generation>/" (worker_runtime/worker_store.hpp); these live under "/ddp/".
//
//   /ddp/attempt_<g>/failure_seq   the generation's failure counter (an ADD counter, starting at 1):
//                                  a worker that fails takes the next number before anything it
//                                  does can make a peer fail (worker_runtime/failure_sequence.hpp)
//                                  and writes it into its error file; an agent takes one when it
//                                  reaps a failed worker that recorded none (launcher/failures/
//                                  failure_sequencer.hpp). Every agent and worker of the generation
//                                  reaches this store at MASTER_ADDR:MASTER_PORT, so one counter
//                                  orders the generation's failures job-wide, without clocks.
//   /ddp/attempt_<g>/quorum        the newest quorum of generation g (an ADD counter; 0 when absent:
//                                  the membership the round formed with): an agent that replaces
//                                  a worker in place takes the next number (docs/recovery.md)
//   /ddp/attempt_<g>/quorum/<q>    why quorum q exists: JSON {"reason": ..., "replaced": [global
//                                  ranks], "node": node rank of the agent that made it}, written by
//                                  that agent right after its ADD drew q; every agent waits for the
//                                  key after its newest and tells its own workers through its
//                                  quorum board (rendezvous/quorum/quorum_board.hpp)
//   /ddp/attempt_<g>/in_place      workers of generation g that recover in place (an ADD counter):
//                                  each process linking worker_runtime adds 1 once, when it built
//                                  its first communicator (a replacement, DDP_STATE_FROM_PEER,
//                                  was counted for its rank already); when g formed in place
//                                  (a node lost or added while the workers ran), each agent whose
//                                  workers keep their processes adds their count for them, so
//                                  their announcement outlives the generation; == WORLD_SIZE
//                                  means every worker does
//   /ddp/attempt_<g>/joined/<r>    processes that took rank r of generation g late (a replacement, or
//                                  a newcomer of a generation formed in place: DDP_STATE_FROM_PEER)
//                                  and built a communicator (an ADD counter; each such process adds
//                                  1 once, where the others announce in_place): the agent that
//                                  replaces rank r reads it to tell a replacement that failed at
//                                  start (it never joined) from one that trained first
//                                  (launcher/recovery/in_place_recovery.hpp's back-off)
//   /ddp/attempt_<g>/in_place_carried  set by those agents: g formed in place, the processes that
//                                  carried on into it all recover in place (a newcomer's agent
//                                  replaces in place before every worker rebuilt)
//   /ddp/attempt_<g>/standby       workers of generation g whose program can wait as a standby
//                                  process (an ADD counter, added just before in_place by those
//                                  that can, and carried over as in_place is:
//                                  worker_runtime/standby.hpp); == WORLD_SIZE once
//                                  in_place is lets the agents keep standby processes
//   /ddp/attempt_<g>/state_lost    set by workers that found no rank of their quorum holding the
//                                  training state (every process was new): the agents then stop
//                                  replacing workers and restart every one (from a checkpoint)
//   /ddp/attempt_<g>/finished      set by a worker that finished its last step ("rank R of quorum
//                                  g.q"): a quorum with it can no longer form, so the agents stop
//                                  replacing workers (every one restarts, as torchrun's would) and
//                                  a replacement waiting to build one gives up at once
//   /ddp/metrics/n                 the newest metric point's number (an ADD counter, from 1)
//   /ddp/metrics/<n % 64>          metric point n: a ring of the newest 64 (metric_points.hpp),
//                                  written by rank 0 of a trainer or a torch script, relayed by
//                                  node rank 0's agent into the rendezvous store for the status
//                                  page
//
// Keys go on the wire verbatim (no PrefixStore).
//
// Thread safety: pure functions.
#pragma once

#include <cstdint>
#include <string>

namespace ddp {

inline std::string failureSequenceKey(int64_t generation) {
  return "/ddp/attempt_" + std::to_string(generation) + "/failure_seq";
}

inline std::string quorumCountKey(int64_t generation) {
  return "/ddp/attempt_" + std::to_string(generation) + "/quorum";
}

inline std::string quorumKey(int64_t generation, int64_t quorum) {
  return quorumCountKey(generation) + "/" + std::to_string(quorum);
}

inline std::string inPlaceCountKey(int64_t generation) {
  return "/ddp/attempt_" + std::to_string(generation) + "/in_place";
}

inline std::string joinedCountKey(int64_t generation, int rank) {
  return "/ddp/attempt_" + std::to_string(generation) + "/joined/" + std::to_string(rank);
}

inline std::string inPlaceCarriedKey(int64_t generation) {
  return "/ddp/attempt_" + std::to_string(generation) + "/in_place_carried";
}

inline std::string standbyCountKey(int64_t generation) {
  return "/ddp/attempt_" + std::to_string(generation) + "/standby";
}

inline std::string stateLostKey(int64_t generation) {
  return "/ddp/attempt_" + std::to_string(generation) + "/state_lost";
}

inline std::string finishedKey(int64_t generation) {
  return "/ddp/attempt_" + std::to_string(generation) + "/finished";
}

inline constexpr int64_t kMetricPointSlots = 64;

inline std::string metricPointCountKey() { return "/ddp/metrics/n"; }

inline std::string metricPointKey(int64_t n) {
  return "/ddp/metrics/" + std::to_string(n % kMetricPointSlots);
}

}  // namespace ddp
