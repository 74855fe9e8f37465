// RoundJoiner: the join protocol of one agent (what Rendezvous::next() runs) within one
// incarnation of the run.
//
// Common path, O(1) store round-trips per agent: read the round hint, add() to the round's join
// counter to draw a slot, write the join record, then wait for its own assignment key
// (rendezvous_plan.hpp; a late joiner waits for the round's result key instead). The agent that
// draws slot maxNodes closes the round at once; the agent that draws slot minNodes (the last-call
// leader) closes it once lastCallTimeout passed and the closing rule of rendezvous_close.hpp holds
// (every member of the previous formed round is back or gone), unless the maxNodes-th agent did
// first. If the leader dies or withdraws, the agents of the next slots (cyclically) take over one
// after the other: the k-th applies the same rule once it has seen minNodes joins for
// lastCallTimeout + k x heartbeatTimeout (k = 1..3; every other agent at k = 4, so that a dead
// leader costs O(1) agents' reading of the join records, not N); if the closing agent dies before
// publishing, the waiting agents abandon the round after 2 x heartbeatTimeout (r/<g>/end) and
// join the next one.
//
// An agent that draws a slot after the round closed (or beyond maxNodes) is late: if the round has
// fewer than maxNodes members it ends the round with kScaleUp (running agents re-rendezvous, free
// of charge) and joins the next one; otherwise it waits as a spare until the round ends.
//
// An agent that dies while joining withdraws too: right before writing its record it arms ddprun's
// ON_CLOSE on its store connection (ddprund, a store an agent hosts): "if this connection closes,
// compareSet the record to kDied", so once its record is visible the closer, which reads the
// records only after freezing the counter, does not count it dead. The registration stays for
// the round (a member that dies before its heartbeat thread armed its own ON_CLOSE leaves kDied
// for its watchers, see rendezvous_monitor.hpp) and is replaced at the next join. Without
// ON_CLOSE (etcd, torch's server) a dead joiner is found only by its silent heartbeat.
//
// An agent whose join times out withdraws: it compareSets its record to kWithdrawn, then reads the
// join counter. Not frozen: the closer (who reads records only after freezing) will not count it.
// Frozen: the closer may have read the record first, so it waits for the result and, when listed,
// is a member after all. Either way it is a member of no round it did not see formed.
//
// Between looks at the round a waiting agent reads nothing but its one key: the last-call leader
// looks every 4 slices, every other agent every pollEvery = max(min(progress interval, max(4
// slices, heartbeatTimeout / 2)), max_nodes x 1 ms) — for a job that ended meanwhile, an abandoned
// round, a closer that died, the leader's take-over, progress logs. So N waiting agents cost O(N)
// store requests per pollEvery (5 each), at most ~1000 looks per second in all however large the
// job; a round that closes in less than pollEvery costs no look at all.
// While waiting it logs at info every few seconds what it waits for and how long is left.
//
// Thread safety: one join at a time (the agent's thread).
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <variant>

#include <spdlog/spdlog.h>

#include "rendezvous/algorithm/detail/rendezvous_assign.hpp"
#include "rendezvous/algorithm/detail/rendezvous_close.hpp"
#include "rendezvous/algorithm/detail/rendezvous_keys.hpp"
#include "rendezvous/algorithm/detail/rendezvous_plan.hpp"
#include "rendezvous/algorithm/detail/rendezvous_wait.hpp"
#include "rendezvous/algorithm/rendezvous_types.hpp"
#include "rendezvous/store/store.hpp"

namespace ddp::detail {

// The last round this agent was a member of in the incarnation it joins (-1: none).
struct MemberHistory {
  int rank = -1;
  int64_t generation = -1;
};

struct JoinedRound {
  int64_t slot = 0;
  RendezvousResult result;
  std::vector<PeerHost> watched;  // the peers this node's heartbeat thread watches
};
// The incarnation ended while this agent joined: the caller reads its tombstone.
struct IncarnationOver {};
using JoinOutcome = std::variant<JoinedRound, IncarnationOver>;

class RoundJoiner {
 public:
  RoundJoiner(Store& store, const RendezvousSettings& settings, const NodeDescriptor& self,
              std::chrono::milliseconds slice);

  // Blocks until this agent is a member of a closed round of `keys`' incarnation (up to
  // joinTimeout) or that job ended. The caller has just seen that job not ended. Throws TimeoutError (after withdrawing; the message says so),
  // ConfigError (conflicting node ranks), NetworkError/ProtocolError from the store.
  JoinOutcome join(const RendezvousKeys& keys, MemberHistory history);

 private:
  // One attempt at round g.
  struct Attempt {
    int64_t g = 0;
    int64_t slot = 0;    // 0: late (no record)
    std::string record;  // the encoded join record
    Clock::time_point deadline;
    MemberHistory history;
  };
  struct NextRound {};
  struct Abandoned {};
  using Step = std::variant<JoinedRound, NextRound, IncarnationOver>;
  using Wait = std::variant<Assignment, Abandoned, IncarnationOver>;

  int64_t currentRound(const RendezvousKeys& keys);
  Step tryJoin(const RendezvousKeys& keys, Attempt a);
  Wait awaitMembership(const RendezvousKeys& keys, const Attempt& a);
  // Waits until `key` exists or `until` passes; its value, or nullopt.
  std::optional<std::string> awaitKey(const std::string& key, Clock::time_point until);
  // One look at a round nobody closed yet: closes it when this agent may. Returns the next time
  // the agent should look again (the leader's close time, at the latest).
  Clock::time_point considerClosing(const RendezvousKeys& keys, const Attempt& a, int64_t count,
                                    Clock::time_point& minSeenAt);
  // How many heartbeatTimeouts after the last call the agent holding `slot` takes over closing
  // (0: the leader), with `joined` slots drawn.
  int64_t backupRank(int64_t slot, int64_t joined) const;
  static constexpr int64_t kBackups = 3;
  Wait withdraw(const RendezvousKeys& keys, const Attempt& a);
  // Arms ON_CLOSE on this agent's store connection (when it has it): "if this connection closes,
  // compareSet `key` from `record` to kDied", replacing the previous round's registration.
  void withdrawOnClose(const std::string& key, const std::string& record);
  void markGone(const RendezvousKeys& keys, const MemberHistory& history);
  // A round closed without this agent (`n` members): scale it up, or wait as a spare.
  Step handleLate(const RendezvousKeys& keys, int64_t g, int n, Clock::time_point deadline);
  void logProgress(const Attempt& a, int64_t count, Clock::time_point minSeenAt);
  [[noreturn]] void throwJoinTimeout(const RendezvousKeys& keys, int64_t g, bool withdrew);
  std::string self() const;

  Store& store_;
  const RendezvousSettings& settings_;
  NodeDescriptor node_;
  std::chrono::milliseconds slice_;
  std::chrono::milliseconds heartbeatTimeout_;
  std::chrono::milliseconds pollEvery_;
  RoundCloser closer_;
  CloseReadiness lastReadiness_;
  Clock::time_point nextProgress_;
  std::string armedRecord_;  // the join record key ON_CLOSE guards ("" = none)
  std::shared_ptr<spdlog::logger> log_;
};

}  // namespace ddp::detail
