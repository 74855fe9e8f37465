// Rendezvous: how the agents (one ddprun per node) of a job agree on rounds over any Store.
//
// A *round* is one membership of the job. Its result gives this node its rank, the world size and
// the job-wide *generation* (TORCHELASTIC_RESTART_COUNT: the same number on every node). A new
// round (generation + 1) starts when workers fail anywhere (spending one restart of the job-wide
// budget), when a node is lost (heartbeat silent for heartbeatTimeout on the observer's own
// monotonic clock), or when a new node waits to join (scale-up, free of charge).
//
// Requirements met by every implementation (DESIGN.md "Rendezvous algorithm"): O(1) store
// round-trips per agent per join on the common path; no clock synchronisation; one agent leaving
// never closes the rendezvous for the others; deterministic node ranks (requested ranks honoured).
//
// All keys live under `rdzv/<runId>/` of the store given.
//
// Thread safety: next(), publishWorkerStore(), workerStore(), reportFailure(), exitBarrier() and
// leave() are called from one thread (the agent's). watch() callbacks run on the rendezvous's own
// heartbeat thread; they must not block.
#pragma once

#include <chrono>
#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "rendezvous/error.hpp"

namespace ddp {

class Store;

// The job ended (failed, or succeeded on every node) before this node could join a round.
// succeeded() tells the two apart: a late agent of a finished job has nothing left to do.
class JobEndedError : public Error {
 public:
  JobEndedError(const std::string& message, bool succeeded)
      : Error(message), succeeded_(succeeded) {}
  bool succeeded() const { return succeeded_; }

 private:
  bool succeeded_;
};

// The current round ended (restart, scale event, lost peer) while a call waited on it; stop the
// workers and call next().
class RoundEndedError : public Error {
 public:
  using Error::Error;
};

struct RendezvousSettings {
  // Job id shared by all agents (--rdzv-id); namespaces the keys.
  std::string runId = "none";
  // A round closes at maxNodes, or lastCallTimeout after minNodes joined.
  int minNodes = 1;
  int maxNodes = 1;
  // Total budget of next() (fewer than minNodes -> TimeoutError).
  std::chrono::milliseconds joinTimeout{std::chrono::seconds(600)};
  std::chrono::milliseconds lastCallTimeout{std::chrono::seconds(30)};
  // Budget for leave() / closing writes.
  std::chrono::milliseconds closeTimeout{std::chrono::seconds(30)};
  // Heartbeat period, and how long a participant may stay silent before it is declared lost
  // (heartbeatTimeout; when zero: keepAliveInterval * keepAliveMaxAttempt).
  std::chrono::milliseconds keepAliveInterval{std::chrono::seconds(5)};
  int keepAliveMaxAttempt = 3;
  std::chrono::milliseconds heartbeatTimeout{0};
  // Job-wide budget of failure restarts (--max-restarts).
  int maxRestarts = 0;
};

struct NodeDescriptor {
  // Host name, for logs and summaries.
  std::string host;
  // Address other nodes can reach this node at (used as MASTER_ADDR when it has node rank 0).
  std::string addr;
  // Agent process id, to tell apart several agents on one host.
  int pid = 0;
  // Workers this node runs (LOCAL_WORLD_SIZE); may differ between nodes.
  int localWorldSize = 1;
  // --node-rank when given explicitly; -1 lets the rendezvous assign one.
  int requestedRank = -1;
  // --role (ROLE_NAME).
  std::string role = "default";
};

struct RendezvousMember {
  int nodeRank = 0;
  int baseRank = 0;  // global rank of this node's local rank 0
  NodeDescriptor node;
};

struct RendezvousResult {
  int64_t generation = 0;  // job-wide; TORCHELASTIC_RESTART_COUNT
  int restartsUsed = 0;    // failure restarts spent from the job budget so far
  int nodeRank = 0;        // GROUP_RANK
  int nodeCount = 1;       // GROUP_WORLD_SIZE
  int baseRank = 0;        // RANK of this node's LOCAL_RANK 0; ranks are contiguous per node
  int worldSize = 1;       // WORLD_SIZE: sum of localWorldSize over the round's nodes
  int baseRoleRank = 0;    // ROLE_RANK of this node's LOCAL_RANK 0
  int roleWorldSize = 1;   // ROLE_WORLD_SIZE
  std::vector<RendezvousMember> members;  // ordered by node rank
};

enum class RendezvousEventKind {
  kScaleUp,           // a node waits to join: stop workers and call next() (free)
  kPeerLost,          // a participant's heartbeat went silent: stop workers and call next()
  kRestartRequested,  // workers failed on some node and the budget allows: stop and call next()
  kJobFailed,         // the job-wide budget is spent (or the job was aborted): stop and exit
  kStoreLost,         // the store stopped answering for longer than heartbeatTimeout
};

struct RendezvousEvent {
  RendezvousEventKind kind;
  int64_t generation = 0;  // the generation the event ends
  std::string detail;      // one readable line (which node, why)
};

enum class ExitOutcome {
  kAllSucceeded,      // every node of the round reported success
  kRestartRequested,  // a new round was requested while waiting: call next()
  kJobFailed,         // the job failed elsewhere
};

class Rendezvous {
 public:
  virtual ~Rendezvous() = default;

  // Joins the next round and blocks until it completes with this node in it. Throws TimeoutError
  // when fewer than minNodes joined within joinTimeout, JobEndedError when the job already ended,
  // NetworkError when the store is unreachable.
  // (StoreRendezvous: also ConfigError when requested node ranks conflict — the job then fails on
  // every node. Calling next() while this node's round still runs ends that round for everybody
  // (kPeerLost). This node heartbeats from the moment next() returns until the next next(),
  // leave() or destruction, whether or not watch() is active.)
  virtual RendezvousResult next() = 0;

  // Node rank 0 publishes the worker store it hosts for the current generation. Non-blocking.
  virtual void publishWorkerStore(const std::string& addr, uint16_t port) = 0;
  // Blocks (up to joinTimeout) until node rank 0 published the current generation's worker store.
  // Throws TimeoutError, RoundEndedError when the round ends first, JobEndedError.
  virtual std::pair<std::string, uint16_t> workerStore() = 0;

  // Heartbeats for this node and watches the current round, calling onEvent (on the heartbeat
  // thread) at most once per generation. Replaces an earlier callback. An event that happened
  // while nobody watched is delivered when watch() is called. After stopWatching() returns no
  // callback runs (unless it is called from the callback itself).
  virtual void watch(std::function<void(const RendezvousEvent&)> onEvent) = 0;
  virtual void stopWatching() = 0;

  // This node's workers failed. Publishes the record (opaque JSON, kept job-wide) and spends one
  // restart of the job budget. Returns true when a restart is allowed (every node then sees
  // kRestartRequested), false when the budget is spent (every node sees kJobFailed). The
  // reporting node itself gets no event for this generation: the return value is its answer.
  // Only the first failure of a generation spends a restart (later reports in the same
  // generation, and reports after the round ended for another reason, spend nothing).
  virtual bool reportFailure(const std::string& failureRecordJson) = 0;
  // Every failure record published in this job, from every node, oldest first.
  virtual std::vector<std::string> failureRecords() = 0;

  // This node's workers all succeeded: waits until every node of the round did (exit barrier),
  // or the round ends otherwise. Throws TimeoutError after `timeout`.
  virtual ExitOutcome exitBarrier(std::chrono::milliseconds timeout) = 0;

  // Leaves the job without closing it for the others (their next heartbeat check sees it gone
  // at once, without waiting for the heartbeat timeout). Idempotent, best effort.
  virtual void leave() = 0;

  // For the agent hosting the rendezvous store, after leave(): blocks until every node of its
  // last round has left too (their final store call), or `timeout` passes, so that stopping the
  // store cuts nobody off mid-call. Returns true when all left. Never throws.
  virtual bool awaitOthersLeft(std::chrono::milliseconds timeout) = 0;
};

// Opens a new connection to the rendezvous store, blocking at most `budget` (connecting included),
// with every call on it bounded by `budget` until setTimeout() says otherwise. Throws what the
// store's constructor throws (NetworkError, TimeoutError, ConfigError).
using StoreConnector = std::function<std::unique_ptr<Store>(std::chrono::milliseconds budget)>;

// The rendezvous over any Store (ddprund, the embedded server, etcd). `store` must outlive it.
// `heartbeatStore` opens the heartbeat thread's own connection (again after each failure), so that
// no call of the agent delays a heartbeat and a store that stops answering is reported after
// heartbeat_timeout (+ at most one keep-alive interval); on a ddprund or embedded server that
// connection also tells the job at once when this agent's process dies (ON_CLOSE, see
// rendezvous_monitor.hpp). Empty: the heartbeat thread shares `store` (tests; a blocked call on a
// TcpStoreClient then delays heartbeats, and round ends are seen at the next heartbeat tick).
std::unique_ptr<Rendezvous> makeRendezvous(Store& store, RendezvousSettings settings,
                                           NodeDescriptor self,
                                           StoreConnector heartbeatStore = {});

}  // namespace ddp
