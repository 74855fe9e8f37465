// RoundMonitor: the rendezvous's own background thread. While this node is a member of a round it
// heartbeats, watches some peers, and reports how the round ends.
//
// Every keep-alive tick (keepAliveInterval) the thread does O(1) store round-trips:
//   * add(r/<g>/hb/<rank>, 1)                   its own heartbeat counter;
//   * multiGet of the counters it watches      node rank 0 watches every other node (O(N) bytes
//                                              per tick for one node only), every other node
//                                              watches its successor (rank + 1) mod N, so a lost
//                                              node is seen even when node rank 0 is the lost one;
//   * readRoundEnd(): the round hint             how everybody learns the round ended (a
//                                              deleted round reads as ended too).
// A watched counter that has not changed for heartbeatTimeout on this observer's steady clock
// (no clock synchronisation) makes the observer end the round with kPeerLost naming the lost rank
// (one compareSet; the first reason wins), unless the round's exit barrier already completed. Store errors that last
// heartbeatTimeout are reported as kStoreLost.
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

#include "rendezvous/detail/rendezvous_keys.hpp"
#include "rendezvous/detail/rendezvous_wait.hpp"
#include "rendezvous/rendezvous.hpp"
#include "rendezvous/store.hpp"

namespace ddp::detail {

// The round this node is a member of, as the monitor needs it.
struct MonitoredRound {
  int64_t generation = 0;
  int rank = 0;
  std::vector<std::string> hosts;  // by node rank, for messages
  RendezvousKeys keys;             // of the round's incarnation
};

class RoundMonitor {
 public:
  using Callback = std::function<void(const RendezvousEvent&)>;

  // Starts the thread (idle until enter()).
  RoundMonitor(Store& store, const RendezvousSettings& settings);
  // Stops and joins the thread. Does not end the round (a destroyed agent looks lost to others).
  ~RoundMonitor();
  RoundMonitor(const RoundMonitor&) = delete;
  RoundMonitor& operator=(const RoundMonitor&) = delete;

  // Starts heartbeating and watching `round` (the first tick within one keep-alive interval, at
  // a random point of it). Non-blocking.
  void enter(MonitoredRound round);
  // Stops heartbeating; events of the old round are no longer delivered. Waits for a tick in
  // flight (at most heartbeatTimeout), so no heartbeat lands after it returns. Until then
  // it heartbeats even after the round ended: the next round waits for members still stopping.
  void exit();
  // Installs (replaces) / removes the event callback. clearCallback() waits for a running callback.
  void setCallback(Callback callback);
  void clearCallback();
  // This node already knows how `generation` ends (it reported a failure): no event for it.
  void suppress(int64_t generation);

 private:
  struct Watched {
    int rank = 0;
    std::string value;
    Clock::time_point changedAt;
  };

  void run();
  void tick(const MonitoredRound& round, uint64_t epoch);
  void watchPeers(const MonitoredRound& round);
  void deliver(const RendezvousEvent& event, uint64_t epoch);

  Store& store_;
  const std::chrono::milliseconds interval_;
  const std::chrono::milliseconds heartbeatTimeout_;
  std::shared_ptr<spdlog::logger> log_;

  std::mutex mutex_;
  std::condition_variable wake_;
  // Guarded by mutex_
  bool stop_ = false;
  bool kick_ = false;
  bool ticking_ = false;  // the monitor thread is inside tick()
  Clock::time_point nextTick_;
  std::minstd_rand random_{std::random_device{}()};
  uint64_t epoch_ = 0;  // bumped by enter() and exit()
  std::optional<MonitoredRound> round_;
  int64_t handledGeneration_ = -1;

  // Guarded by callbackMutex_ (recursive: the callback may call clearCallback()).
  std::recursive_mutex callbackMutex_;
  Callback callback_;

  // Owned by the monitor thread.
  uint64_t tickEpoch_ = UINT64_MAX;
  std::vector<Watched> watched_;
  Clock::time_point lastOk_;
  bool failing_ = false;

  std::thread thread_;  // last: starts after every field above is ready
};

}  // namespace ddp::detail
