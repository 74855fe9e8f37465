// RendezvousKeys: the key layout of one run's rendezvous state, and the encodings of its values.
//
//   rdzv/_owner              agent-hosted stores only: the hosting agent's run id, set before the
//                            store accepts a connection (ddprund serves many runs: no owner)
//   rdzv/<runId>/inc         the run's current incarnation N (decimal, created "0"); an agent that
//                            was no part of incarnation N and finds it ended moves it to N + 1
//
// Every other key lives under `rdzv/<runId>/<N>/` (incarnation N):
//
//   job                   the fingerprint of the job that holds incarnation N (compareSet by its
//                         first agent; RendezvousSettings::jobFingerprint): agents of another job
//                         are refused before they touch anything else
//   ended                 tombstone, set once when the job ended: "<ok|failed>|<unix ms>|
//                         <generation>|<reason>" (exit barrier done / budget spent, conflicting
//                         ranks), "verdict|..." when an agent's verdict ended it (reportVerdict).
//                         Kept after the job's other keys are deleted.
//   failures              every failure record, appended as "<byte length>\n<record>". Kept with
//                         the tombstone when the job failed (dropped nodes print the summary).
//   round                 hint: the newest round number; moved past g only after r/<g>/end is set,
//                         so `round > g` means round g ended (and a missing hint: the job's keys
//                         were deleted)
//   restarts              job-wide counter of failure restarts spent (add)
//   formed                the newest round that formed with members
//   low                   the oldest round whose keys may still exist
//   cleaned               agent-hosted stores only: set by the last agent leaving once it deleted
//                         the job's keys (the hosting agent waits for it before stopping the store)
//   excluded              bad-node exclusions (ExclusionBoard::claim): the newest
//                         kMaxExclusionsKept, one JSON object per line (node_exclusion.hpp),
//                         rewritten whole by compareSet. Kept with the tombstone.
//   excluded_count        every exclusion granted in the job (add). Kept with the tombstone.
//   r/<g>/count           join counter of round g (add); once closed it holds kFrozen + joins
//   r/<g>/closer          slot of the agent that closed round g (compareSet election)
//   r/<g>/node/<slot>     the join record of the agent that drew `slot` (1-based), or kWithdrawn
//                         once that agent gave up (compareSet: atomic with respect to the closer),
//                         or kDied once its store connection closed (the ON_CLOSE it armed when
//                         it joined, against ddprund or a store an agent hosts)
//   r/<g>/as/<slot>       the assignment of the agent that drew `slot`: the round header and its
//                         place (rendezvous_plan.hpp); the only round value a member reads
//   r/<g>/result          the round header alone (closed: node count, world size, or an error);
//                         written last, after every assignment; late joiners wait on it
//   r/<g>/roster          every member's join record in node-rank order: read only by the agent
//                         closing the next round (its closing rule), never by every agent
//   r/<g>/hb/<rank>       heartbeat counter of node rank `rank` (add, one per keep-alive tick)
//   r/<g>/end             why round g ended: "<kind>[/<lost rank>]|<detail>" (first reason wins;
//                         kind "verdict": kJobFailed by an agent's verdict)
//   r/<g>/gone            node ranks of round g known gone (left, withdrew): "<rank>\n" appended
//   r/<g>/failcount       failure reports in round g (add); only the first spends a restart
//   r/<g>/exit, r/<g>/done   exit barrier counter and the key its last arrival sets
//   r/<g>/worker_store    "<addr>:<port>" of the worker store node rank 0 hosts in generation g
//   r/<g>/leaving         nodes of round g granted or asking to leave it for a cooldown (add)
//   r/<g>/spares          agents that waited as spares while round g ran (add; less the ones that
//                         gave up): they join the round after it
//   r/<g>/left            agents of round g that left the job (add); the last one ends the job
//                         if nobody else did ("every node left") and deletes its keys
//   r/<g>/rec/<name>/<rank>  round record `name` of node rank `rank` (publishRoundRecord: the
//                         launcher's preflight reports)
//   r/<g>/records         the names of round g's records, "<name>\n" appended once per publish,
//                         so that deleting the round finds them (round_records.hpp)
//
// What the status pages read (docs/status.md; written by the agents, never read
// by the rendezvous):
//
//   r/<g>/status/<rank>   node rank `rank`'s status record in round g: one JSON object (its
//                         workers, their pids and exits), at most a few KiB, rewritten on changes
//   metrics               the job's metric points, the newest 256, one JSON object per line,
//                         rewritten whole (at most once a second) by node rank 0's agent
//   history               how the job's last 32 generations ended, one JSON object per line,
//                         rewritten whole by node rank 0's agent as each generation starts and
//                         when the job ends. Kept with the tombstone.
//
// Lifetime: the closer of a formed round g deletes every round below the previous formed one
// (so about two rounds exist at a time); the last agent leaving an ended job deletes all of its
// keys but `ended`, `history`, `excluded`, `excluded_count` (and `failures` when it failed), and
// the tombstone of the incarnation before. A ddprund thus holds O(live jobs) keys plus at most 6
// per ended run id (inc, ended, history, failures and the two of exclusions).
//
// Cost: per round, each agent reads O(1) keys of O(1) size (its assignment; node rank 0's lists
// the N - 1 hosts it watches). O(N) work happens once per round, by one agent: the closer reads
// the join records and writes every assignment, and the next round's closer reads the roster.
//
// Thread safety: immutable after construction; the free functions are pure or say which store
// calls they make.
#pragma once

#include <chrono>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "rendezvous/algorithm/rendezvous_types.hpp"
#include "rendezvous/store/store.hpp"

namespace ddp::detail {

// Added to a round's join counter when it closes: a join that draws a slot >= kFrozen arrived
// after the round closed.
inline constexpr int64_t kFrozen = 1'000'000'000;
// The join record of an agent that withdrew (its join timed out).
inline constexpr std::string_view kWithdrawn = "-";
// The join record of an agent whose store connection closed before it was done with the record
// (its process died): set by the server through the ON_CLOSE the agent armed when it joined.
inline constexpr std::string_view kDied = "x";
// A heartbeat counter as the closer creates it: its node has not beaten in the round yet.
inline constexpr std::string_view kNoHeartbeatYet = "0";
// A join record that still stands for a joining (or joined) agent.
inline bool isLiveRecord(std::string_view value) { return value != kWithdrawn && value != kDied; }

class RendezvousKeys {
 public:
  RendezvousKeys(const std::string& runId, int64_t incarnation);

  static std::string owner() { return "rdzv/_owner"; }
  static std::string incarnationOf(const std::string& runId) { return "rdzv/" + runId + "/inc"; }

  std::string job() const { return root_ + "job"; }
  std::string ended() const { return root_ + "ended"; }
  std::string failures() const { return root_ + "failures"; }
  std::string round() const { return root_ + "round"; }
  std::string restarts() const { return root_ + "restarts"; }
  std::string formed() const { return root_ + "formed"; }
  std::string low() const { return root_ + "low"; }
  std::string cleaned() const { return root_ + "cleaned"; }
  std::string exclusions() const { return root_ + "excluded"; }
  std::string exclusionCount() const { return root_ + "excluded_count"; }

  std::string count(int64_t g) const { return r(g) + "count"; }
  std::string closer(int64_t g) const { return r(g) + "closer"; }
  std::string node(int64_t g, int64_t slot) const { return r(g) + "node/" + std::to_string(slot); }
  std::string assignment(int64_t g, int64_t slot) const {
    return r(g) + "as/" + std::to_string(slot);
  }
  std::string result(int64_t g) const { return r(g) + "result"; }
  std::string roster(int64_t g) const { return r(g) + "roster"; }
  std::string heartbeat(int64_t g, int rank) const { return r(g) + "hb/" + std::to_string(rank); }
  std::string end(int64_t g) const { return r(g) + "end"; }
  std::string gone(int64_t g) const { return r(g) + "gone"; }
  std::string failCount(int64_t g) const { return r(g) + "failcount"; }
  std::string exitCount(int64_t g) const { return r(g) + "exit"; }
  std::string exitDone(int64_t g) const { return r(g) + "done"; }
  std::string workerStore(int64_t g) const { return r(g) + "worker_store"; }
  std::string left(int64_t g) const { return r(g) + "left"; }
  std::string leaving(int64_t g) const { return r(g) + "leaving"; }
  std::string spares(int64_t g) const { return r(g) + "spares"; }
  std::string record(int64_t g, const std::string& name, int rank) const {
    return r(g) + "rec/" + name + "/" + std::to_string(rank);
  }
  std::string recordNames(int64_t g) const { return r(g) + "records"; }
  std::string status(int64_t g, int rank) const {
    return r(g) + "status/" + std::to_string(rank);
  }
  std::string metrics() const { return root_ + "metrics"; }
  std::string history() const { return root_ + "history"; }
  // The keys of round g that exist once per round (not per slot or rank).
  std::vector<std::string> roundKeys(int64_t g) const;

  const std::string& runId() const { return runId_; }
  int64_t incarnation() const { return incarnation_; }

 private:
  std::string r(int64_t g) const { return root_ + "r/" + std::to_string(g) + "/"; }
  std::string runId_;
  int64_t incarnation_;
  std::string root_;
};

// Reads `key` in one round trip without creating it: its value, or nullopt when it is missing.
std::optional<std::string> peek(Store& store, const std::string& key);

// The most keys one store request of the rendezvous carries (ddprund's default limit is 131072);
// longer lists are split into several requests.
inline constexpr size_t kKeysPerRequest = 8192;
// multiGet / multiSet / check over any number of keys, kKeysPerRequest at a time, in order (so
// the last key of a multiSet is written last). Throw what the store throws.
std::vector<std::string> multiGetAll(Store& store, const std::vector<std::string>& keys);
void multiSetAll(Store& store, const std::vector<std::string>& keys,
                 const std::vector<std::string>& values);
bool checkAll(Store& store, const std::vector<std::string>& keys);

// Why a round ended; stored at r/<g>/end.
struct RoundEnd {
  RendezvousEventKind kind = RendezvousEventKind::kPeerLost;
  std::string detail;
  int lostRank = -1;  // kPeerLost: the node rank declared lost or gone, when one was
  bool removed = false;  // read back: the round's keys are gone (not stored)
  bool verdict = false;  // kJobFailed by an agent's verdict (stored as the kind "verdict")
};

std::string encodeRoundEnd(const RoundEnd& end);
// Unknown kinds decode as kPeerLost (a newer agent's reason still means "re-rendezvous").
RoundEnd decodeRoundEnd(const std::string& value);

// Ends round g with `end` unless another reason was recorded first (compareSet), and moves the
// round hint on to g + 1 so that agents re-joining go straight to the next round.
void endRound(Store& store, const RendezvousKeys& keys, int64_t g, const RoundEnd& end);

// Whether round g ended, and why, as every waiter checks it: one round trip (the hint) while the
// round runs. A round whose keys were deleted (this node was away) reads as kPeerLost; when the
// job failed the kind is kJobFailed with the job's reason. Throws what the store throws.
std::optional<RoundEnd> readRoundEnd(Store& store, const RendezvousKeys& keys, int64_t g);
// Why round g ended, once it did (r/<g>/end, or "removed" when its keys are gone), with the
// kJobFailed override above. Two or three round trips.
RoundEnd explainRoundEnd(Store& store, const RendezvousKeys& keys, int64_t g);

// How a job ended (the `ended` tombstone).
struct JobEnd {
  bool succeeded = false;
  int64_t unixMs = 0;
  int64_t generation = -1;
  std::string reason;
  bool verdict = false;  // failed by an agent's verdict (stored as the status "verdict")
};
std::string encodeJobEnd(const JobEnd& end);
// A value this version did not write decodes as a failure whose reason is the value.
JobEnd decodeJobEnd(const std::string& value);
// A JobEnd stamped with the wall clock now.
JobEnd jobEndNow(bool succeeded, int64_t generation, std::string reason);

// Node ranks recorded at r/<g>/gone ("<rank>\n" each). Malformed entries are skipped.
std::vector<int> decodeGone(const std::string& value);

// Failure records: framing for the append-only `failures` key.
std::string frameRecord(const std::string& record);
// Throws ProtocolError when the framing is broken.
std::vector<std::string> unframeRecords(const std::string& value);

// heartbeatTimeout, or keepAliveInterval * keepAliveMaxAttempt when it is zero.
std::chrono::milliseconds effectiveHeartbeatTimeout(const RendezvousSettings& settings);

// Parses a decimal counter value; throws ProtocolError naming the key.
int64_t parseCount(const std::string& key, const std::string& value);

}  // namespace ddp::detail
