// RoundMonitor: the rendezvous's own background thread. While this node is a member of a round it
// heartbeats, watches some peers, and reports how the round ends.
//
// Its store connection is its own (HeartbeatLink over a StoreConnector), so a blocked call of the
// agent never delays a heartbeat; every call on it is bounded by a per-call budget (see below), and
// a failed connection is replaced by a fresh one. Without a connector it shares the agent's store
// (tests), sleeps between ticks and sets no budgets.
//
// Entering a round (enter()), the thread at once arms ddprun's ON_CLOSE on its connection when the
// server has it (ddprund, an embedded StoreServer): "if this connection closes, compare-set
// r/<g>/end from empty to kPeerLost 'node rank r (host) lost its connection to the rendezvous
// store (agent died?)' naming its rank, and the round hint from g to g + 1". So the death of this agent's
// process ends the round for everybody within milliseconds, not after heartbeatTimeout. Leaving
// the round normally (exit(), or enter() of the next) clears it first; a connection given up after
// an error clears it as it closes. With etcd or a torch server there is no ON_CLOSE: peers learn
// of a dead agent through its heartbeat only.
//
// Every keep-alive tick (keepAliveInterval, the first at a random point of the first interval) the
// thread does O(1) store round-trips:
//   * add(r/<g>/hb/<rank>, 1)                   its own heartbeat counter;
//   * multiGet of the counters it watches      the closer chose them (MonitoredRound::watched):
//                                              node rank 0 watches every other node (O(N) bytes
//                                              per tick for one node only), every other node
//                                              watches its successor (rank + 1) mod N, so a lost
//                                              node is seen even when node rank 0 is the lost one;
//   * readRoundEnd(): the round hint             how everybody learns the round ended (a
//                                              deleted round reads as ended too).
// Between ticks, on an own connection that can be interrupted (TcpStoreClient, InMemoryStore), it
// waits on r/<g>/end, in slices of probeEvery = clamp(heartbeatTimeout / 6, 50 ms,
// keepAliveInterval) up to the next tick, so a round's end is seen within milliseconds and a slice
// whose CANCEL_WAIT goes unanswered shows a stalled store within probeEvery; enter(), exit(),
// setCallback() and the destructor interrupt that wait.
// A watched counter that has not changed for heartbeatTimeout on this observer's steady clock
// (no clock synchronisation) makes the observer end the round with kPeerLost naming the lost rank
// (one compareSet; the first reason wins), unless the round's exit barrier already completed. A kPeerLost end found
// after the exit barrier completed (an agent died after everybody succeeded) is not delivered.
//
// Store stalls and loss, each judged on this node's own steady clock:
//   * `unansweredSince` is when this node sent the first request the store has left unanswered
//     (for a call that failed only after this process itself was stopped past the call's budget:
//     the failure minus that budget); cleared by the next answer.
//   * A call gets keepAliveInterval while the store answers, and clamp(unansweredSince +
//     heartbeatTimeout - now, 50 ms, keepAliveInterval) after that.
//   * A failed tick (or a failed wait) is retried 50 ms later, not a keep-alive later: the attempt
//     in flight when a stalled store wakes up is answered at once, so every node beats again within
//     milliseconds of the store's return.
//   * A failure seen at or after unansweredSince + heartbeatTimeout is reported as kStoreLost. So
//     a stall shorter than heartbeatTimeout is never a loss, and one longer than heartbeatTimeout +
//     probeEvery always is (heartbeatTimeout + keepAliveInterval on a connection that cannot wait:
//     etcd, a shared store); never read_timeout.
//   * An observer whose own store calls failed does not count that time against its peers: its
//     first successful look at the watched counters after a failure restarts every peer's silence
//     clock. A peer then has a whole heartbeatTimeout from that look to beat again.
//
// Thread safety: all methods are safe from any thread. The callback runs on the monitor thread, at
// most once per generation, never after clearCallback() returns (except when clearCallback() is
// called from the callback itself). It must not block.
#pragma once

#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <functional>
#include <memory>
#include <mutex>
#include <optional>
#include <random>
#include <string>
#include <thread>
#include <vector>

#include <spdlog/spdlog.h>

#include "rendezvous/algorithm/detail/heartbeat_link.hpp"
#include "rendezvous/algorithm/detail/rendezvous_keys.hpp"
#include "rendezvous/algorithm/detail/rendezvous_plan.hpp"
#include "rendezvous/algorithm/detail/rendezvous_wait.hpp"
#include "rendezvous/algorithm/rendezvous_types.hpp"
#include "rendezvous/store/store.hpp"

namespace ddp::detail {

// The round this node is a member of, as the monitor needs it.
struct MonitoredRound {
  int64_t generation = 0;
  int rank = 0;
  std::string host;               // this node's, for messages
  std::vector<PeerHost> watched;  // the peers it watches (rendezvous_plan.hpp's watchedBy)
  RendezvousKeys keys;            // of the round's incarnation
};

class RoundMonitor {
 public:
  using Callback = std::function<void(const RendezvousEvent&)>;

  // `connect` opens the monitor's own store connection; empty: it shares `store`. Opens nothing
  // and starts no thread yet: the thread starts at the first enter() (an agent that never joins
  // a round costs no thread). Throws std::system_error from enter() when no thread can start.
  RoundMonitor(Store& store, StoreConnector connect, const RendezvousSettings& settings);
  // Stops and joins the thread (after clearing ON_CLOSE when exit() was called; without exit(),
  // the closing connection ends the round for the others, as a dead agent's would). Blocks at most
  // about 200 ms plus one call budget.
  ~RoundMonitor();
  RoundMonitor(const RoundMonitor&) = delete;
  RoundMonitor& operator=(const RoundMonitor&) = delete;

  // Starts heartbeating and watching `round`. Non-blocking.
  void enter(MonitoredRound round);
  // Stops heartbeating; events of the old round are no longer delivered. Waits for a tick in
  // flight (at most heartbeatTimeout), so no heartbeat lands after it returns. Until then it
  // heartbeats even after the round ended: the next round waits for members still stopping.
  void exit();
  // Installs (replaces) / removes the event callback. clearCallback() waits for a running callback.
  void setCallback(Callback callback);
  void clearCallback();
  // This node already knows how `generation` ends (it reported a failure): no event for it.
  void suppress(int64_t generation);

 private:
  struct Watched {
    int rank = 0;
    std::string host;
    int64_t slot = 0;  // its join slot (its join record)
    std::string value;
    Clock::time_point changedAt;
    bool beaten = false;  // its counter moved past the closer's "0"
  };
  // ON_CLOSE registrations held on the current connection, and for which round.
  struct Armed {
    uint64_t epoch = 0;
    std::vector<std::string> keys;
  };

  void run();
  void interrupt();
  void prepare(const MonitoredRound& round, uint64_t epoch);
  bool tick(const MonitoredRound& round, uint64_t epoch);
  // False when a store call failed (the caller retries soon).
  bool awaitEnd(const MonitoredRound& round, uint64_t epoch, Clock::time_point until);
  void watchPeers(Store& store, const MonitoredRound& round);
  void checkEnd(Store& store, const MonitoredRound& round, uint64_t epoch);
  void handleEnd(Store& store, const MonitoredRound& round, uint64_t epoch, const RoundEnd& end);
  void arm(const MonitoredRound& round, uint64_t epoch);
  void disarm();
  void dropConnection();
  // A call sent at `sentAt` with `budget` failed with `e`.
  void storeFailed(const MonitoredRound& round, uint64_t epoch, const std::exception& e,
                   Clock::time_point sentAt, std::chrono::milliseconds budget);
  void storeAnswered(const MonitoredRound& round);
  std::chrono::milliseconds callBudget(Clock::time_point at) const;
  void deliver(const RendezvousEvent& event, uint64_t epoch);

  const std::chrono::milliseconds interval_;
  const std::chrono::milliseconds heartbeatTimeout_;
  const std::chrono::milliseconds probeEvery_;
  std::shared_ptr<spdlog::logger> log_;

  std::mutex mutex_;
  std::condition_variable wake_;
  // Guarded by mutex_
  bool stop_ = false;
  bool kick_ = false;
  bool ticking_ = false;  // the monitor thread is inside tick()
  Clock::time_point nextTick_;
  std::minstd_rand random_;
  uint64_t epoch_ = 0;  // bumped by enter() and exit()
  std::optional<MonitoredRound> round_;
  int64_t handledGeneration_ = -1;

  // Guarded by callbackMutex_ (recursive: the callback may call clearCallback()).
  std::recursive_mutex callbackMutex_;
  Callback callback_;

  // Owned by the monitor thread (the link's interrupt() excepted).
  HeartbeatLink link_;
  uint64_t preparedEpoch_ = UINT64_MAX;
  uint64_t endSeenEpoch_ = UINT64_MAX;
  std::optional<Armed> armed_;
  std::vector<Watched> watched_;
  std::optional<Clock::time_point> unansweredSince_;  // see the header comment
  bool restartClocks_ = false;  // a call failed since the watched counters were last read
  bool overloaded_ = false;  // a call of the current outage met a busy notice (OverloadedError)

  std::thread thread_;  // started by the first enter(), under mutex_
};

}  // namespace ddp::detail
