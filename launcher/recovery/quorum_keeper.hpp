// QuorumKeeper: this agent's side of the quorums of its generation (docs/recovery.md).
//
// Every agent of a job that recovers in place holds one. At the start of a generation it writes
// quorum 0 (the round as it formed) on its board for every local worker, before they start. A
// quorum is made by the agent whose worker failed: it claims the next number in the worker store
// with one COMPARE_SET on /ddp/attempt_<g>/quorum/<q> (worker_store_keys.hpp) — a claim that
// finds the number taken tries the next one, so concurrent claims on different nodes each get
// their own — then writes it on its own board at once. Every other agent's watcher thread waits
// on the worker store for the key after the newest it knows, and writes each new quorum on its
// board, where its workers find it (quorum_board.hpp). A board only ever moves forward: a quorum
// older than what it shows is skipped (a newer one already superseded it).
//
// Worker store value of a quorum: JSON {"reason", "replaced" (global ranks), "node" (the node
// rank that made it), "claim" (a random token: who won a contested number)}.
//
// Thread safety: beginGeneration()/endGeneration()/makeQuorum() from one thread (the agent's or
// one helper at a time); the watcher is the keeper's own thread; onAllInPlace's callback runs on
// it and must not block.
#pragma once

#include <atomic>
#include <chrono>
#include <cstdint>
#include <functional>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "rendezvous/algorithm/rendezvous.hpp"
#include "rendezvous/quorum/quorum_board.hpp"
#include "rendezvous/quorum/quorum_record.hpp"

namespace ddp {

class TcpStoreClient;

struct QuorumChange {
  QuorumId id;
  std::string reason;
  std::vector<int> replaced;  // global ranks whose process is new
  int node = -1;              // the node rank that made it
};

class QuorumKeeper {
 public:
  // Creates the board, one slot per local worker. Throws Error (memfd/mmap failed).
  explicit QuorumKeeper(int localWorkers);
  ~QuorumKeeper();
  QuorumKeeper(const QuorumKeeper&) = delete;
  QuorumKeeper& operator=(const QuorumKeeper&) = delete;

  // What workers get as DDP_QUORUM_BOARD.
  const std::string& boardPath() const { return board_.path(); }
  int localWorkers() const { return localWorkers_; }

  // Generation `round` starts, its worker store at addr:port (`token`: the store's, "" = none):
  // connects to it (`budget`), writes quorum (g, 0) for every local worker and starts the watcher.
  // Throws what TcpStoreClient's constructor throws.
  // `inherited`: the generation was formed in place from one whose workers all recover in place
  // (the same processes, and newcomers run the job's one entry point): allInPlace() at once, and
  // this node's workers' announcements are carried into the new generation's counters
  // (worker_store_keys.hpp: in_place, standby, in_place_carried), since their processes go on
  // and announce only once. Throws what the store calls throw.
  void beginGeneration(const RendezvousResult& round, const std::string& addr, uint16_t port,
                       const std::string& token, std::chrono::milliseconds budget,
                       bool inherited = false);
  // Stops the watcher and drops the connections. Idempotent; never throws.
  void endGeneration();

  // Workers of the generation that recover in place: the world size when the generation formed in
  // place (inherited here, or in_place_carried by another node's agent: its processes carried
  // on, and every one announced before), else the in_place counter. At most two store calls.
  // Throws NetworkError, TimeoutError.
  int64_t workersInPlace();
  // True once every worker of the generation announced that it recovers in place (the watcher
  // reads the in_place counter until it does). Non-blocking; any thread.
  bool allInPlace() const { return allInPlace_.load(); }
  // Processes that took global rank `rank` of the generation late (replacements) and built a
  // communicator: the joined counter (worker_store_keys.hpp). One store call. Throws
  // NetworkError, TimeoutError.
  int64_t joinedCount(int rank);
  // True when a worker found the generation's state lost (worker_store_keys.hpp). One store call.
  bool stateLost();
  // True when a worker of the generation finished its last step (worker_store_keys.hpp's
  // finished key): a quorum with it can no longer form. One store call.
  bool workerFinished();
  // Makes the next quorum of the generation (see above) and writes it on this node's board.
  // Throws NetworkError, TimeoutError.
  QuorumChange makeQuorum(const std::vector<int>& replaced, const std::string& reason);
  // The newest quorum on this node's board.
  QuorumId current() const;

  // Called once per generation (not an inherited one) when every worker announced that it
  // recovers in place, with whether every one can also wait as a standby process
  // (worker_runtime/standby.hpp). Runs on the watcher thread; must not block.
  void onAllInPlace(std::function<void(bool standbyCapable)> callback);

 private:
  void watch();
  // Writes `change` on the board unless an equal or newer one is there. Guarded by mutex_.
  void publishLocked(const QuorumChange& change);

  QuorumBoard board_;
  const int localWorkers_;
  std::function<void(bool)> allInPlaceCallback_;
  std::unique_ptr<TcpStoreClient> calls_;   // makeQuorum, workersInPlace
  std::unique_ptr<TcpStoreClient> watcher_;  // the watcher thread's
  std::thread thread_;
  std::atomic<bool> stop_{false};
  std::atomic<bool> allInPlace_{false};
  bool inherited_ = false;
  // Every worker of the last generation whose announcements completed could wait as a standby.
  std::atomic<bool> standbyCapable_{false};
  mutable std::mutex mutex_;
  // Guarded by mutex_:
  RendezvousResult round_;
  Endpoint master_;  // the worker store's
  QuorumId current_{-1, -1};
};

}  // namespace ddp
