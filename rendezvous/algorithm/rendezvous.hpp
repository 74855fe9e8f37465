// Rendezvous: how the agents (one ddprun per node) of a job agree on rounds over any Store.
//
// A *round* is one membership of the job. Its result gives this node its rank, the world size and
// the job-wide *generation* (TORCHELASTIC_RESTART_COUNT: the same number on every node). A new
// round (generation + 1) starts when workers fail anywhere (spending one restart of the job-wide
// budget), when a node is lost (heartbeat silent for heartbeatTimeout on the observer's own
// monotonic clock, or its agent left), or when a new node waits to join (scale-up, free of charge).
// At most one round of a job is open at any time: a round closes on its last call only once every
// member of the previous formed round has joined it or is known gone, so a scale-up forms one
// bigger world instead of two small ones.
//
// A run id has *incarnations*: once a job ended (succeeded or failed), an agent that was no part
// of it and joins with the same run id starts a fresh job (incarnation + 1, generation 0); an agent
// that was part of it learns how it ended (JobEnded). Keys of ended rounds and incarnations are
// deleted (rendezvous_keys.hpp has the layout). An incarnation belongs to one job: the first agent
// records its jobFingerprint, and an agent of another job (another entry point or node range under
// the same run id, e.g. two jobs that both kept the default id "none") is refused at once instead
// of merging into it (pytorch#82160).
//
// Requirements met by every implementation (docs/rendezvous.md, "Cost"): O(1) store
// round-trips of O(1) size per agent per join on the common path, O(N) total store work per round
// (one agent, the closer, does the O(N) part once); no clock synchronisation; one agent leaving
// never closes the rendezvous for the others; deterministic node ranks (requested ranks honoured).
//
// Outcomes are values: how a wait ended (the round ended, the job ended) is returned; exceptions
// are failures (TimeoutError, NetworkError, ConfigError, ...).
//
// This interface is the rounds: joining them, what a round's nodes exchange (the worker store,
// round records), watching and waiting for a round's end, the exit barrier, leaving. What a
// round's failures decide (restarts, verdicts, recoveries in place) is failures()
// (failure_ledger.hpp); leaving bad nodes out of the job is exclusions() (exclusion_board.hpp);
// the values all three use are in rendezvous_types.hpp.
//
// Thread safety: every method but watch()/stopWatching() is called from one thread (the agent's),
// and so are failures()'s and exclusions()'s. watch() callbacks run on the rendezvous's own
// heartbeat thread; they must not block.
#pragma once

#include <chrono>
#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "rendezvous/algorithm/exclusion_board.hpp"
#include "rendezvous/algorithm/failure_ledger.hpp"
#include "rendezvous/algorithm/rendezvous_types.hpp"

namespace ddp {

class Store;

class Rendezvous {
 public:
  virtual ~Rendezvous() = default;

  // Joins the next round and blocks until it closes with this node in it (RendezvousResult), or
  // returns JobEnded when the job this node was part of ended. A node that was part of no job of
  // this run id and finds the last one ended starts a fresh one (a new incarnation, logged).
  // Throws TimeoutError when the round did not form within joinTimeout (this node then withdraws:
  // it is a member of no later round), ConfigError when requested node ranks conflict (the job
  // then fails on every node), NetworkError when the store is unreachable, Error when the store
  // belongs to another run (an agent of another run id hosts it) or when another job (another
  // jobFingerprint) runs under this run id — nothing of that job is touched then.
  // Calling next() while this node's round still runs ends that round for everybody (kPeerLost).
  // This node heartbeats from the moment next() returns a round until the next next(), leave() or
  // destruction, whether or not watch() is active.
  virtual NextResult next() = 0;

  // Node rank 0 publishes the worker store it hosts for the current generation. Non-blocking.
  virtual void publishWorkerStore(const std::string& addr, uint16_t port) = 0;
  // Blocks (up to joinTimeout) until node rank 0 published the current generation's worker store,
  // or the round ended. Throws TimeoutError, ProtocolError (malformed address).
  virtual WorkerStoreResult workerStore() = 0;
  // The addresses the current round's nodes connect from: each node's advertised address
  // (NodeDescriptor::addr), then its interfaceAddrs, in node rank order, each address once: one
  // O(N) read of the round's roster, made by node rank 0 only (its worker store serves these
  // addresses, docs/security.md). Empty when the round's keys are gone. Throws NetworkError,
  // ProtocolError (malformed roster), Error before next() returned a round.
  virtual std::vector<std::string> memberAddresses() = 0;

  // Round records: small values the nodes of the current round exchange before their workers
  // start (the launcher's preflight reports), one per (name, node rank), kept under the round and
  // deleted with its keys. `name`: letters, digits, '-', '_' and '.' (ProtocolError otherwise).
  //
  // Publishes this node's record `name` for the current round, replacing an earlier one.
  // Non-blocking; two store round trips. Throws NetworkError, Error before next() returned a round.
  virtual void publishRoundRecord(const std::string& name, const std::string& value) = 0;
  // Blocks until every node rank in `nodeRanks` published `name` in the current round, the round
  // ends (RoundEnded), or `timeout` passes (the missing ones are nullopt). One wait in slices plus
  // one multi-get on the common path; one check per rank after a timeout. Throws NetworkError,
  // Error before next() returned a round.
  virtual RoundRecordsResult roundRecords(const std::string& name,
                                          const std::vector<int>& nodeRanks,
                                          std::chrono::milliseconds timeout) = 0;

  // Heartbeats for this node and watches the current round, calling onEvent (on the heartbeat
  // thread) at most once per generation. Replaces an earlier callback. An event that happened
  // while nobody watched is delivered when watch() is called. After stopWatching() returns no
  // callback runs (unless it is called from the callback itself).
  virtual void watch(std::function<void(const RendezvousEvent&)> onEvent) = 0;
  virtual void stopWatching() = 0;

  // Blocks until the current round ends (how it ended) or `timeout` passes (nullopt). For an
  // agent whose workers failed with what looks like a peer's collateral damage: a lost peer ends
  // the round within heartbeatTimeout. Throws NetworkError.
  virtual std::optional<RendezvousEvent> awaitRoundEnd(std::chrono::milliseconds timeout) = 0;

  // This node's workers all succeeded: waits until every node of the round did (AllSucceeded), or
  // the round ends otherwise (RoundEnded). Throws TimeoutError after `timeout`.
  virtual ExitBarrierResult exitBarrier(std::chrono::milliseconds timeout) = 0;

  // Leaves the job without closing it for the others (their next heartbeat check sees it gone
  // at once, without waiting for the heartbeat timeout). The last node to leave a job that ended
  // deletes its keys (but the run's small tombstone). Idempotent, best effort, never throws.
  virtual void leave() = 0;

  // For the agent hosting the rendezvous store, after leave(): blocks until every node of its
  // last round has left too (their final store call), or `timeout` passes, so that stopping the
  // store cuts nobody off mid-call. Returns true when all left. Never throws.
  virtual bool awaitOthersLeft(std::chrono::milliseconds timeout) = 0;

  // What this agent knows of its job from its own calls (no store call): the run id, the
  // incarnation, its newest round and that round's restart count, the failure records it has
  // read (as each round that followed a restart formed) or published. Never throws.
  virtual JobSnapshot snapshot() const = 0;

  // The job's failure records, verdicts and recoveries in place (failure_ledger.hpp), and its
  // bad-node exclusions (exclusion_board.hpp), over the same store and rounds as this object;
  // they live as long as it does. Never throw.
  virtual FailureLedger& failures() = 0;
  virtual ExclusionBoard& exclusions() = 0;
};

// The rendezvous over any Store (ddprund, the embedded server, etcd). `store` must outlive it.
// Throws ConfigError for invalid settings.
// `heartbeatStore` opens the heartbeat thread's own connection (again after each failure), so that
// no call of the agent delays a heartbeat and a store that stops answering is reported after
// heartbeat_timeout (+ at most one keep-alive interval); on a ddprund or embedded server that
// connection also tells the job at once when this agent's process dies (ON_CLOSE, see
// rendezvous_monitor.hpp). Empty: the heartbeat thread shares `store` (tests; a blocked call on a
// TcpStoreClient then delays heartbeats, and round ends are seen at the next heartbeat tick).
std::unique_ptr<Rendezvous> makeRendezvous(Store& store, RendezvousSettings settings,
                                           NodeDescriptor self,
                                           StoreConnector heartbeatStore = {});

// The key an agent-hosted rendezvous store holds from the moment it listens: the run id of the
// agent hosting it. next() fails at once when it names another run.
std::string rendezvousOwnerKey();

}  // namespace ddp
