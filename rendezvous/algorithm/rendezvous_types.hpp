// Rendezvous types: the values the rendezvous takes and returns — its settings, a node's
// descriptor, a round's result, how a round or a job ended, the job snapshot, bad-node
// exclusions — and the outcome variants of its calls. rendezvous.hpp (rounds), failure_ledger.hpp
// (failure records, verdicts, recoveries) and exclusion_board.hpp (bad-node exclusion) use them;
// so do the protocol pieces in detail/, which is why they live apart from those interfaces.
//
// Thread safety: plain values; copy them freely. endName() is pure.
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
#include "rendezvous/base/rank_layout.hpp"


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

// The RankLayout of this node's local rank `localRank` in `round`, the node running
// `localWorldSize` workers (0 <= localRank < localWorldSize). Pure.
RankLayout layoutOf(const RendezvousResult& round, int localRank, int localWorldSize);

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
  // kJobFailed: an agent's verdict ended the job (FailureLedger::reportVerdict(); `detail` is the
  // verdict's line), not its spent budget or another cause.
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

// The most exclusions a job keeps (the newest); ExclusionBoard::count() counts them all.
inline constexpr size_t kMaxExclusionsKept = 32;

// ExclusionBoard::claim(): whether the node may leave, and the counts the rule looked at.
struct ExclusionClaim {
  bool granted = false;
  int members = 0;  // the round's nodes
  int leaving = 0;  // nodes of the round that claimed to leave, this one included
  int spares = 0;   // agents that waited as spares for the round (they take a place next round)
};

// FailureLedger::recordRecovery(): the restart was granted; the round goes on (restartsUsed:
// spent so far).
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

// Opens a new connection to the rendezvous store, blocking at most `budget` (connecting included),
// with every call on it bounded by `budget` until setTimeout() says otherwise. Throws what the
// store's constructor throws (NetworkError, TimeoutError, ConfigError).
using StoreConnector = std::function<std::unique_ptr<Store>(std::chrono::milliseconds budget)>;

}  // namespace ddp
