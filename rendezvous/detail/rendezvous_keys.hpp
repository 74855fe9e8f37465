// RendezvousKeys: the key layout of one job's rendezvous state, and the encoding of a round's end.
//
// Every key lives under `rdzv/<runId>/`:
//
//   round                 hint: the newest round number (decimal); agents skip rounds that ended
//   ended                 set once when the job ended: it failed (restart budget spent, conflicting
//                         node ranks) or finished (its exit barrier completed); the value is the
//                         reason. Agents that see it stop (JobEndedError / kJobFailed).
//   restarts              job-wide counter of failure restarts spent (add)
//   failures              every failure record, appended as "<byte length>\n<record>"
//   r/<g>/count           join counter of round g (add); once closed it holds kFrozen + joins
//   r/<g>/closer          slot of the agent that closed round g (compareSet election)
//   r/<g>/node/<slot>     the join record of the agent that drew `slot` (1-based)
//   r/<g>/result          the round's membership in node-rank order (JSON), or an error
//   r/<g>/hb/<rank>       heartbeat counter of node rank `rank` (add, one per keep-alive tick)
//   r/<g>/end             why round g ended: "<kind>|<detail>" (compareSet: the first reason wins)
//   r/<g>/failcount       failure reports in round g (add); only the first spends a restart
//   r/<g>/exit, r/<g>/done   exit barrier counter and the key its last arrival sets
//   r/<g>/worker_store    "<addr>:<port>" of the worker store node rank 0 hosts in generation g
//   r/<g>/left, r/<g>/left_all   agents that left the job after round g (their last store call),
//                         and the key the last of them sets: the agent hosting the store waits
//                         for it before closing the store
//
// Thread safety: immutable after construction; the free functions are pure.
#pragma once

#include <chrono>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "rendezvous/rendezvous.hpp"
#include "rendezvous/store.hpp"

namespace ddp::detail {

// Added to a round's join counter when it closes: a join that draws a slot >= kFrozen arrived
// after the round closed.
inline constexpr int64_t kFrozen = 1'000'000'000;

class RendezvousKeys {
 public:
  explicit RendezvousKeys(const std::string& runId);

  std::string round() const { return root_ + "round"; }
  std::string ended() const { return root_ + "ended"; }
  std::string restarts() const { return root_ + "restarts"; }
  std::string failures() const { return root_ + "failures"; }

  std::string count(int64_t g) const { return r(g) + "count"; }
  std::string closer(int64_t g) const { return r(g) + "closer"; }
  std::string node(int64_t g, int64_t slot) const { return r(g) + "node/" + std::to_string(slot); }
  std::string result(int64_t g) const { return r(g) + "result"; }
  std::string heartbeat(int64_t g, int rank) const { return r(g) + "hb/" + std::to_string(rank); }
  std::string end(int64_t g) const { return r(g) + "end"; }
  std::string failCount(int64_t g) const { return r(g) + "failcount"; }
  std::string exitCount(int64_t g) const { return r(g) + "exit"; }
  std::string exitDone(int64_t g) const { return r(g) + "done"; }
  std::string workerStore(int64_t g) const { return r(g) + "worker_store"; }
  std::string left(int64_t g) const { return r(g) + "left"; }
  std::string allLeft(int64_t g) const { return r(g) + "left_all"; }

  const std::string& root() const { return root_; }

 private:
  std::string r(int64_t g) const { return root_ + "r/" + std::to_string(g) + "/"; }
  std::string root_;
};

// The `ended` value of a job whose exit barrier completed starts with this; anything else means
// the job failed.
inline constexpr std::string_view kJobFinished = "the job finished";
inline bool jobSucceeded(const std::string& endedValue) { return endedValue.starts_with(kJobFinished); }

// Why a round ended; stored at r/<g>/end.
struct RoundEnd {
  RendezvousEventKind kind = RendezvousEventKind::kPeerLost;
  std::string detail;
};

std::string encodeRoundEnd(const RoundEnd& end);
// Unknown kinds decode as kPeerLost (a newer agent's reason still means "re-rendezvous").
RoundEnd decodeRoundEnd(const std::string& value);

// Ends round g with `end` unless another reason was recorded first (compareSet), and moves the
// round hint on to g + 1 so that agents re-joining go straight to the next round.
void endRound(Store& store, const RendezvousKeys& keys, int64_t g, const RoundEnd& end);

// Failure records: framing for the append-only `failures` key.
std::string frameRecord(const std::string& record);
// Throws ProtocolError when the framing is broken.
std::vector<std::string> unframeRecords(const std::string& value);

// heartbeatTimeout, or keepAliveInterval * keepAliveMaxAttempt when it is zero.
std::chrono::milliseconds effectiveHeartbeatTimeout(const RendezvousSettings& settings);

// Parses a decimal counter value; throws ProtocolError naming the key.
int64_t parseCount(const std::string& key, const std::string& value);

}  // namespace ddp::detail
