// Test helper: the agent's side of recovery in place for worker_runtime tests — quorum records
// for a world on one loopback node, published on a QuorumBoard, and the env a worker of that
// board starts with.
#pragma once

#include <cstdint>
#include <utility>
#include <vector>

#include "rendezvous/quorum/quorum_board.hpp"
#include "rendezvous/quorum/quorum_record.hpp"
#include "rendezvous/server/store_server.hpp"
#include "tests/worker_runtime/rank_threads.hpp"
#include "worker_runtime/worker_env.hpp"

namespace ddp::test {

inline QuorumRecord recordFor(int rank, int world, uint16_t port, int64_t quorum) {
  QuorumRecord r;
  r.id = {0, quorum};
  r.rank = rank;
  r.worldSize = world;
  r.localRank = rank;
  r.localWorldSize = world;
  r.master.host = "127.0.0.1";
  r.master.port = port;
  r.reason = quorum == 0 ? "" : "the last rank exited: replaced in place";
  if (quorum > 0) r.replaced = {world - 1};
  return r;
}

inline void publishQuorum(QuorumBoard& board, int world, uint16_t port, int64_t quorum) {
  std::vector<std::pair<int, QuorumRecord>> records;
  for (int r = 0; r < world; ++r) records.emplace_back(r, recordFor(r, world, port, quorum));
  board.publish(records);
}

inline WorkerEnv envFor(int rank, int world, uint16_t port, const QuorumBoard& board) {
  auto env = loopbackEnv(rank, world);
  env.master.port = port;
  env.useAgentStore = true;
  env.quorumBoard = board.path();
  env.quorumSlot = rank;
  return env;
}

inline StoreServerOptions loopbackStore() {
  StoreServerOptions options;
  options.host = "127.0.0.1";
  options.name = "worker-store (elastic test)";
  return options;
}

}  // namespace ddp::test
