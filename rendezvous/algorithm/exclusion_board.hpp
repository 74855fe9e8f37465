// ExclusionBoard: bad-node exclusion (docs/running.md "Bad-node exclusion"), kept job-wide in the
// rendezvous store. A node whose workers keep failing (or that strict preflight or straggler
// detection blamed) claims to leave its round; when the job keeps min_nodes without it, it sits
// out a cooldown and then joins again as a newcomer. The board keeps the job's exclusions for its
// /status, /metrics, status page and summary.
//
// Rendezvous::exclusions() returns the rendezvous's own board: it works on the rendezvous's
// current round and store. claimExclusion() below is the same claim over a store connection of the
// caller's own, for another thread.
//
// Thread safety: the board's methods are called from the thread that drives the Rendezvous, never
// concurrently with the Rendezvous's own calls. claimExclusion() may be called from any thread
// that owns `store`.
#pragma once

#include <chrono>
#include <cstdint>
#include <string>
#include <vector>

#include "rendezvous/algorithm/rendezvous_types.hpp"

namespace ddp {

class Store;

class ExclusionBoard {
 public:
  virtual ~ExclusionBoard() = default;

  // Asks to leave this node's current round out of the job: granted when
  // the round keeps min_nodes without it — its nodes, less every node that claimed to leave it
  // (this one included; one atomic counter, so concurrent claims never drop the job below
  // min_nodes), plus the spares that waited for it, number at least minNodes. A fixed-size job
  // without a spare therefore never grants one. Granted: `exclusion` is kept job-wide (the newest
  // kMaxExclusionsKept) and counted; refused: nothing is kept. O(1) store calls (the list is
  // rewritten whole, at most kMaxExclusionsKept entries). Throws NetworkError, Error before next()
  // returned a round.
  virtual ExclusionClaim claim(const NodeExclusion& exclusion) = 0;
  // After a granted claim: this node leaves the job for `cooldown` without ending it. It is
  // marked gone from its round (which ends for the others as a lost peer, unless it ended
  // already), stops heartbeating, and waits until the job ends (true) or `cooldown` passes
  // (false, on this agent's monotonic clock). Then next() joins the job again as a newcomer (a
  // scale-up when the round has room, a spare otherwise) or reports how it ended. Throws
  // NetworkError.
  virtual bool sitOut(std::chrono::milliseconds cooldown) = 0;
  // After next() returned a round following sitOut(): marks this node's newest exclusion
  // returned in `generation`. Best effort, never throws.
  virtual void markReturned(int64_t generation) = 0;
  // The job's exclusions, oldest first (at most kMaxExclusionsKept), and how many there were
  // (empty and 0 before next() attached to a job). One store read each. Throw NetworkError.
  virtual std::vector<NodeExclusion> list() = 0;
  virtual int64_t count() = 0;
};

// ExclusionBoard::claim() over a store connection of the caller's own, for a thread other
// than the one that drives the Rendezvous (the agent's straggler detection): node
// `exclusion.nodeRank` of round `generation` of `members` nodes, in incarnation `incarnation` of
// job `runId`. The same rule, counter and list. Throws what the store throws.
ExclusionClaim claimExclusion(Store& store, const std::string& runId, int64_t incarnation,
                              int64_t generation, int members, int minNodes,
                              const NodeExclusion& exclusion);

}  // namespace ddp
