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
// Thread safety: every method but watch()/stopWatching() is called from one thread (the agent's).
// watch() callbacks run on the rendezvous's own heartbeat thread; they must not block.
#pragma once

#include <chrono>
#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <variant>
#include <vector>

#include "rendezvous/base/error.hpp"

namespace ddp {

class Store;

struct RendezvousSettings {
  // Job id shared by all agents (--rdzv-id); namespaces the keys.
  std::string runId = "none";
  // A round closes at maxNodes, or lastCallTimeout after minNodes joined (and every member of the
  // previous round rejoined or is gone).
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
  // What identifies the job among others that may use the same run id on the same store (one
  // readable line, at most kMaxJobFingerprint bytes; the launcher's is the entry point and the
  // node range). The first agent of an incarnation stores it; an agent whose fingerprint differs
  // is refused (next() throws Error naming both) and the running job is not disturbed. Agents of
  // one job must compute the same one. Empty: no check.
  std::string jobFingerprint;
  // A round that follows a formed one closes as soon as every member of that round rejoined it
  // or is known gone (and minNodes joined), without waiting for the last call: the survivors of a
  // node lost, or the members joined by a newcomer, form the next round at once. For jobs whose
  // workers keep running across rounds (--restart-scope=failed, docs/recovery.md). A first round
  // still waits for its last call.
  bool closeOnceAccounted = false;
};

// The longest RendezvousSettings::jobFingerprint (longer ones are a ConfigError).
inline constexpr size_t kMaxJobFingerprint = 512;
// The most NodeDescriptor::interfaceAddrs a join record carries (more are left out).
inline constexpr size_t kMaxInterfaceAddrs = 16;

struct NodeDescriptor {
  // Host name, for logs and summaries.
  std::string host;
  // Address other nodes can reach this node at (used as MASTER_ADDR when it has node rank 0).
  std::string addr;
  // This host's other addresses (interfaceAddresses(): no loopback, no link-local), at most
  // kMaxInterfaceAddrs: its connections to another node may come from any of them (a multi-NIC
  // host reaches node rank 0 from the interface that routes there, not always from `addr`).
  std::vector<std::string> interfaceAddrs;
  // Agent process id, to tell apart several agents on one host.
  int pid = 0;
  // Workers this node runs (LOCAL_WORLD_SIZE); may differ between nodes.
  int localWorldSize = 1;
  // --node-rank when given explicitly; -1 lets the rendezvous assign one.
  int requestedRank = -1;
  // --role (ROLE_NAME).
  std::string role = "default";
  // Orders the nodes that requested no rank (lower first; -1 = none): SLURM_NODEID of an elastic
  // Slurm job. Not a rank: survivors of a loss are renumbered compactly.
  int order = -1;
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
  // No roster of the other nodes: each node reads only its own assignment (O(1) per node; the
  // closing agent computes them all once). MASTER_ADDR comes from the worker store node rank 0
  // publishes (publishWorkerStore / workerStore).
};

enum class RendezvousEventKind {
  kScaleUp,           // a node waits to join: stop workers and call next() (free)
  kPeerLost,          // a participant's heartbeat went silent or it left: stop, call next() (free)
  kRestartRequested,  // workers failed on some node and the budget allows: stop and call next()
  kJobFailed,         // the job-wide budget is spent (or the job was aborted): stop and exit
  kStoreLost,         // the store stopped answering for longer than heartbeatTimeout
};

// How a generation ended, as the status history and pages name it: "scale-up", "peer lost",
// "restart", "job failed", "store lost".
const char* endName(RendezvousEventKind kind);

struct RendezvousEvent {
  RendezvousEventKind kind = RendezvousEventKind::kPeerLost;
  int64_t generation = 0;  // the generation the event ends
  std::string detail;      // one readable line (which node, why)
  int lostRank = -1;       // the node rank declared lost or gone, when one was (kept when a
                           // failed job turned the end into kJobFailed)
  bool roundRemoved = false;  // the round's keys were gone: this node was away for rounds
  // kJobFailed: an agent's verdict ended the job (reportVerdict(); `detail` is the verdict's
  // line), not its spent budget or another cause.
  bool verdict = false;
};

// A call that waited on the current round returns this when the round ended first: stop this
// node's workers and call next() (which reports the job's end when the job is over).
struct RoundEnded {
  RendezvousEvent event;
};

// exitBarrier(): every node of the round succeeded; the job is finished.
struct AllSucceeded {};

// This node's part in a job that ended.
enum class NodeStanding {
  kMember,      // a member of the job's last round
  kDropped,     // a member of an earlier round, then left out (its join timed out, it was
                // declared lost, or it rejoined too late)
  kNeverMember  // it waited (a spare, a late joiner) but was a member of no round: it ran nothing
};

enum class JobResult { kSucceeded, kFailed, kUnknown };

// next(): the job this node was part of ended. kUnknown: it ended, and a new job with the same
// run id has started since and removed its record.
struct JobEnded {
  JobResult result = JobResult::kUnknown;
  std::string reason;            // one line: how the job ended
  int64_t endedAtUnixMs = 0;     // wall clock when it ended (display only; 0 = unknown)
  int64_t lastGeneration = -1;   // the generation that ended it (-1 = unknown)
  NodeStanding standing = NodeStanding::kNeverMember;
  int64_t memberGeneration = -1;  // the last generation this node was a member of (-1 = none)
  std::string droppedDetail;      // kDropped: why this node's last round ended, when known
  bool verdict = false;           // kFailed by an agent's verdict (reportVerdict(); `reason`)
};

struct WorkerStoreEndpoint {
  std::string addr;
  uint16_t port = 0;
};

// What one agent knows of its job, enough to carry it on in a fresh store when the store it used
// is lost (launcher/rendezvous/store_failover.hpp; job_snapshot.hpp merges and seeds it).
struct JobSnapshot {
  std::string runId;
  int64_t incarnation = -1;  // the incarnation this agent joined (-1: none)
  int64_t generation = -1;   // the newest round this agent was a member of (-1: none)
  int restartsUsed = 0;      // the job-wide restarts spent as of that round
  std::vector<std::string> failureRecords;  // failure records this agent has seen, oldest first
};

// Bad-node exclusion (docs/running.md "Bad-node exclusion"): a node left out of the job's rounds
// for a cooldown, as the job's /status, /metrics, status page and summary show it.
struct NodeExclusion {
  std::string host;
  int pid = 0;
  int nodeRank = 0;          // its node rank in `generation`
  int64_t generation = 0;    // the round it left
  std::string why;           // one line: what it failed, how often, within what window
  int64_t cooldownMs = 0;    // how long it stays out (on its own monotonic clock)
  int64_t unixMs = 0;        // wall clock when it left (display only, never compared)
  int64_t returnedAt = -1;   // the generation it joined again (-1: still out, or never back)
};

// The most exclusions a job keeps (the newest); Rendezvous::exclusionCount() counts them all.
inline constexpr size_t kMaxExclusionsKept = 32;

// claimExclusion(): whether the node may leave, and the counts the rule looked at.
struct ExclusionClaim {
  bool granted = false;
  int members = 0;  // the round's nodes
  int leaving = 0;  // nodes of the round that claimed to leave, this one included
  int spares = 0;   // agents that waited as spares for the round (they take a place next round)
};

// recordRecovery(): the restart was granted; the round goes on (restartsUsed: spent so far).
struct RecoveryGranted {
  int restartsUsed = 0;
};

using NextResult = std::variant<RendezvousResult, JobEnded>;
// RoundEnded: the round had already ended (its cause), or the budget is spent (kJobFailed, which
// ends the round for every node).
using RecoveryResult = std::variant<RecoveryGranted, RoundEnded>;
using WorkerStoreResult = std::variant<WorkerStoreEndpoint, RoundEnded>;
using ExitBarrierResult = std::variant<AllSucceeded, RoundEnded>;
// roundRecords(): the values found, in the order of the node ranks asked for (nullopt: that node
// published none before the timeout).
using RoundRecords = std::vector<std::optional<std::string>>;
using RoundRecordsResult = std::variant<RoundRecords, RoundEnded>;

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

  // This node's workers failed. Publishes the record (opaque JSON, kept job-wide) and, unless the
  // round already ended, spends one restart of the job budget. Returns how the round ended:
  // kRestartRequested (a restart was granted, to this node's report or an earlier one of this
  // generation), kJobFailed (the budget is spent: every node sees kJobFailed), or the other cause
  // that ended the round first (kPeerLost, kScaleUp: nothing spent). The reporting node gets no
  // watch() event for this generation. Blocks up to closeTimeout when another node reported
  // first. Throws TimeoutError, NetworkError.
  virtual RendezvousEvent reportFailure(const std::string& failureRecordJson) = 0;
  // This node's workers failed and its agent judged restarting hopeless (launcher/agent/
  // verdict.hpp): as reportFailure(), except that when this report is the generation's first (the
  // one that would spend a restart) and the budget has a restart left, the job ends instead, with
  // `verdict` (one line) as its reason: kJobFailed with `verdict` set, on every node (and
  // JobEnded::verdict for a node that rejoins). With the budget spent, the job fails as after
  // reportFailure() (kJobFailed, `verdict` unset: the root cause's exit code). When the round had
  // already ended or another node reported first, that decision stands.
  // Blocks and throws as reportFailure().
  virtual RendezvousEvent reportVerdict(const std::string& failureRecordJson,
                                        const std::string& verdict) = 0;
  // This node's workers failed and are replaced in place (docs/recovery.md): the round goes on.
  // Spends one restart of the job budget and, when granted, publishes the record (kept job-wide,
  // like reportFailure's); every recovery counts, concurrent ones on different nodes each spend one.
  // Returns RecoveryGranted, or RoundEnded: the round had already ended (nothing spent), or this
  // recovery found the budget spent (kJobFailed on every node). Throws NetworkError.
  virtual RecoveryResult recordRecovery(const std::string& failureRecordJson) = 0;
  // Every failure record published in this job, from every node, oldest first.
  virtual std::vector<std::string> failureRecords() = 0;

  // Bad-node exclusion. Asks to leave this node's current round out of the job: granted when
  // the round keeps min_nodes without it — its nodes, less every node that claimed to leave it
  // (this one included; one atomic counter, so concurrent claims never drop the job below
  // min_nodes), plus the spares that waited for it, number at least minNodes. A fixed-size job
  // without a spare therefore never grants one. Granted: `exclusion` is kept job-wide (the newest
  // kMaxExclusionsKept) and counted; refused: nothing is kept. O(1) store calls (the list is
  // rewritten whole, at most kMaxExclusionsKept entries). Throws NetworkError, Error before next()
  // returned a round.
  virtual ExclusionClaim claimExclusion(const NodeExclusion& exclusion) {
    (void)exclusion;
    return {};
  }
  // After a granted claim: this node leaves the job for `cooldown` without ending it. It is
  // marked gone from its round (which ends for the others as a lost peer, unless it ended
  // already), stops heartbeating, and waits until the job ends (true) or `cooldown` passes
  // (false, on this agent's monotonic clock). Then next() joins the job again as a newcomer (a
  // scale-up when the round has room, a spare otherwise) or reports how it ended. Throws
  // NetworkError.
  virtual bool sitOut(std::chrono::milliseconds cooldown) {
    (void)cooldown;
    return false;
  }
  // After next() returned a round following sitOut(): marks this node's newest exclusion
  // returned in `generation`. Best effort, never throws.
  virtual void markReturned(int64_t generation) { (void)generation; }
  // The job's exclusions, oldest first (at most kMaxExclusionsKept), and how many there were.
  virtual std::vector<NodeExclusion> exclusions() { return {}; }
  virtual int64_t exclusionCount() { return 0; }

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
  virtual JobSnapshot snapshot() const { return JobSnapshot{}; }
};

// Opens a new connection to the rendezvous store, blocking at most `budget` (connecting included),
// with every call on it bounded by `budget` until setTimeout() says otherwise. Throws what the
// store's constructor throws (NetworkError, TimeoutError, ConfigError).
using StoreConnector = std::function<std::unique_ptr<Store>(std::chrono::milliseconds budget)>;

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

// Rendezvous::claimExclusion() over a store connection of the caller's own, for a thread other
// than the one that drives the Rendezvous (the agent's straggler detection): node
// `exclusion.nodeRank` of round `generation` of `members` nodes, in incarnation `incarnation` of
// job `runId`. The same rule, counter and list. Throws what the store throws.
ExclusionClaim claimExclusion(Store& store, const std::string& runId, int64_t incarnation,
                              int64_t generation, int members, int minNodes,
                              const NodeExclusion& exclusion);

// The key an agent-hosted rendezvous store holds from the moment it listens: the run id of the
// agent hosting it. next() fails at once when it names another run.
std::string rendezvousOwnerKey();

}  // namespace ddp
