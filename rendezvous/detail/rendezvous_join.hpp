// RoundJoiner: the join protocol of one agent (what Rendezvous::next() runs).
//
// Common path, O(1) store round-trips per agent: read the round hint, add() to the round's join
// counter to draw a slot, write the join record, then wait for the one result key. The agent that
// draws slot maxNodes closes the round at once; the agent that draws slot minNodes (the last-call
// leader) closes it lastCallTimeout later unless the maxNodes-th agent already did. Closing is one
// compareSet election on r/<g>/closer, one add(kFrozen) that freezes the join counter, one
// multiGet of the join records and one multiSet of the result plus every heartbeat key. If the
// leader dies, any member that has seen minNodes joins for lastCallTimeout + heartbeatTimeout
// closes instead; if the closing agent dies before publishing, the waiting agents abandon the
// round after 2 x heartbeatTimeout (r/<g>/end) and join the next one.
//
// An agent that draws a slot after the round closed (or beyond maxNodes) is late: if the round has
// fewer than maxNodes members it ends the round with kScaleUp (running agents re-rendezvous, free
// of charge) and joins the next one; otherwise it waits as a spare until the round ends.
//
// Thread safety: one join at a time (the agent's thread).
#pragma once

#include <cstdint>
#include <memory>
#include <optional>

#include <spdlog/spdlog.h>

#include "rendezvous/detail/rendezvous_assign.hpp"
#include "rendezvous/detail/rendezvous_keys.hpp"
#include "rendezvous/detail/rendezvous_wait.hpp"
#include "rendezvous/rendezvous.hpp"
#include "rendezvous/store.hpp"

namespace ddp::detail {

struct JoinedRound {
  int64_t slot = 0;
  RendezvousResult result;
};

class RoundJoiner {
 public:
  RoundJoiner(Store& store, const RendezvousKeys& keys, const RendezvousSettings& settings,
              const NodeDescriptor& self, std::chrono::milliseconds slice);

  // Blocks until this agent is a member of a closed round (up to joinTimeout). Throws
  // TimeoutError (too few nodes, or a full job), JobEndedError, ConfigError (conflicting node
  // ranks), NetworkError/ProtocolError from the store.
  JoinedRound join(int prevRank);

  // The round the job is at now (skipping rounds that ended), creating the hint if needed.
  int64_t currentRound();

 private:
  std::optional<JoinedRound> tryJoin(int64_t g, int prevRank, Clock::time_point deadline);
  void lastCall(int64_t g, Clock::time_point deadline);
  void tryClose(int64_t g);
  std::vector<JoinRecord> readJoinRecords(int64_t g, int64_t n);
  // The closed round's membership, or nullopt when the round was abandoned (never closed).
  std::optional<RoundMembership> awaitMembership(int64_t g, Clock::time_point deadline);
  void handleLate(int64_t g, const RoundMembership& m, Clock::time_point deadline);
  void throwIfJobEnded();
  [[noreturn]] void throwJoinTimeout(int64_t g);
  std::string self() const;
  std::string closerToken_;

  Store& store_;
  const RendezvousKeys& keys_;
  const RendezvousSettings& settings_;
  NodeDescriptor node_;
  std::chrono::milliseconds slice_;
  std::chrono::milliseconds heartbeatTimeout_;
  std::shared_ptr<spdlog::logger> log_;
};

}  // namespace ddp::detail
