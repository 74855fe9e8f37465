// ElasticGroup: a worker's communicator for its job's current quorum, rebuilt in place when the
// quorum changes (ddprun --restart-scope=failed; docs/recovery.md).
//
// Under ddprun with --restart-scope=failed the agent exports DDP_QUORUM_BOARD and DDP_QUORUM_SLOT
// (rendezvous/quorum/quorum_board.hpp). The group then reads its membership from the board, not
// from the environment it started with: rank, world size and worker store are those of the
// newest quorum (the same as the env for a worker started with its generation; a replacement
// process started later gets the current ones too). Once its first communicator is built it
// announces that it recovers in place (the worker store's in_place counter), which is what lets
// the agents replace a failed worker instead of restarting every one. A process announces once
// in its life, whatever quorum it first built: a replacement (DDP_STATE_FROM_PEER) was counted
// for its rank already (it says that it joined instead: its agent's back-off tells it from one
// that failed at start), and when a generation forms in place the agents carry the
// announcements of the processes that go on into it (worker_store_keys.hpp), so a failure at any
// moment of the rebuild is recovered in place.
//
// When a collective fails (CommError) or quorumChanged() says the agent published a newer quorum,
// the worker calls rebuild(): the old communicator is closed first (its connections close, so
// peers still blocked on it fail at once and rebuild too; a Gloo one on a thread of its own, as
// Gloo takes a tick of its event loop per connection), then the group waits for a quorum newer
// than the one it had — the agent of a failed worker publishes one within milliseconds — and
// builds a communicator for it over its own keys ("ddp/comm/q<quorum>" under the generation's
// prefix: Gloo's full mesh, or a new NCCL unique id). A newer quorum published while it builds
// makes it start over for that one, so every rank ends on the newest. What state the rebuilt
// group starts from is the caller's business (state_agreement.hpp).
//
// With a board, comm() checks the board before every collective (a collective of a superseded
// quorum fails at once with CommError), and a watchdog thread aborts a collective of the old
// quorum still running when a newer one is published (Communicator::abort: every wait of the
// communicator ends, also one for a message that was halfway on the wire when its peer died or
// froze, and its connections are shut down; a peer cut off by the network never closes them),
// so the collective fails with CommError and the rank rebuilds like the others. A communicator
// being built for a quorum that a newer one superseded (the first one a replacement process
// builds included) has its pairs still listening for a peer shut down at once (Gloo waits its
// whole budget for a peer that died or moved on), its connects that no peer answers as soon as
// their SYN was sent again (Gloo's connect would wait through minutes of SYN retries for a stopped
// peer's full accept queue or a frozen host), and the connections it opened 2 s later: the build
// fails with CommError and the rank moves on to the newest quorum in its own process. The process
// never ends for a superseded quorum: a rank still blocked after the abort is wedged itself, and
// is left to hang detection (ddprun --hang-timeout), which replaces a rank that makes no progress.
//
// A rank that finished its last step says so (markFinished()): a replacement started after that,
// or one waiting to build with it, gives up at once (CommError) instead of waiting its whole
// budget for a peer that will not come back, and the agents restart every worker instead.
//
// Without a board (torchrun, --restart-scope=all, or the board cannot be opened: a warning says
// why) the group is the plain communicator of the env, and rebuild() throws CommError: the worker
// exits and its agent restarts the group as before.
//
// The constructor sets SIGPIPE to be ignored when its disposition is the default (see there).
//
// Thread safety: one thread (the training thread) calls everything but quorumChanged(), which any
// thread may call. comm() must not be used across a rebuild().
#pragma once

#include <atomic>
#include <chrono>
#include <cstdint>
#include <thread>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "rendezvous/base/endpoint.hpp"
#include "rendezvous/quorum/quorum_record.hpp"
#include "rendezvous/store/store.hpp"
#include "worker_runtime/communicator.hpp"
#include "worker_runtime/worker_env.hpp"

namespace ddp {

class QuorumBoardReader;

// What a running worker sees of its membership (the quorum's record, or the env without a board):
// its RankLayout, then the rest.
struct GroupView : RankLayout {
  QuorumId id;                // (generation, quorum)
  std::vector<int> replaced;  // ranks whose process is new in this quorum
  std::string reason;         // why this quorum exists ("" for the one a generation starts with)
};

class ElasticGroup {
 public:
  // How long a rank whose build of the newest quorum failed waits for a newer one before it gives
  // up (CommError). A peer that dies makes its agent publish one within the agent's back-off (at
  // most 8 s); a build that failed with every peer alive (a connection refused) brings none, and
  // its peers would wait in that build for this rank until their budget ends.
  static constexpr std::chrono::milliseconds kFailedBuildGrace{10000};

  // Connects to the worker store and builds the first communicator (options.storePrefix is
  // replaced by a per-quorum prefix when there is a board). Blocks up to options.timeout.
  // Throws what connectWorkerStore() and makeCommunicator() throw (TimeoutError, NetworkError,
  // CommError, ConfigError). `failedBuildGrace`: kFailedBuildGrace but in tests.
  ElasticGroup(const WorkerEnv& env, const CommOptions& options,
               std::chrono::milliseconds failedBuildGrace = kFailedBuildGrace);
  ~ElasticGroup();
  ElasticGroup(const ElasticGroup&) = delete;
  ElasticGroup& operator=(const ElasticGroup&) = delete;

  Communicator& comm();
  // The worker store of the current quorum's generation (keys under /worker/attempt_<g>/).
  Store& store() { return *store_; }
  const GroupView& view() const { return view_; }
  // Where the current generation's worker store is (MASTER_ADDR / MASTER_PORT of the quorum).
  const Endpoint& storeEndpoint() const { return storeEndpoint_; }
  // True when this process is new in the current quorum and its peers have state (a replacement,
  // or a node added in place): its state must come from a peer, not from disk.
  bool joinedLate() const;
  // True when a board was opened: rebuild() can succeed.
  bool recoversInPlace() const { return board_ != nullptr; }
  // True when the agent published since the current communicator was built. One atomic load;
  // false without a board. Any thread.
  bool quorumChanged() const;
  // The board's epoch word, for waits that watch it between other work (the shared-memory
  // allreduce); null without a board. Valid for the group's lifetime.
  const std::atomic<uint32_t>* quorumEpoch() const;
  uint32_t builtAtEpoch() const { return builtEpoch_; }

  // Destroys the communicator, then builds one for the newest quorum newer than view().id,
  // waiting up to `budget` for the agent to publish one. Returns the new view. Throws CommError
  // when there is no board, when no newer quorum came within the budget, when the newest quorum's
  // build failed and none newer came within the failed-build grace, or when the board holds no
  // readable record (each says so); the worker should then exit (its agent replaces it in place,
  // which is the newer quorum its peers move to, or restarts the group).
  const GroupView& rebuild(std::chrono::milliseconds budget);

  // Tells the agents that no rank of the current quorum holds the training state (every process
  // is new), so replacing workers cannot help: they restart every worker instead. Best effort
  // (one store call, errors logged); never throws.
  void markStateLost();
  // Tells the agents and the other ranks that this rank finished the job (its last step is done):
  // a quorum with it can no longer form, so no worker is replaced from now on (a failure restarts
  // every worker, as torchrun's would) and a replacement already waiting to build a quorum gives up
  // at once (CommError) instead of waiting its whole budget. Best effort (one store call, errors
  // logged); never throws. No-op without a board.
  void markFinished();

 private:
  // Builds for the newest record on the board that is newer than `from` (or as new, with
  // newer = false), waiting for one up to `budget`; `fallback` stands in while the slot is empty.
  void join(const QuorumId& from, bool newer, std::chrono::milliseconds budget,
            const QuorumRecord* fallback);
  void build(const QuorumRecord& record, std::chrono::steady_clock::time_point deadline);
  void announceInPlace();
  // While a build waits for its peers: throws CommError (and sets finishedBy_) once a rank of the
  // generation finished the job.
  void checkFinished(const QuorumId& building);
  void watchdog();  // and the three steps below: elastic_group_watchdog.cpp
  // The watchdog's steps for an operation `op` (its quorum's epoch) that a newer quorum superseded:
  // each pass, fails what of a build cannot complete (listening pairs on the first look, connects
  // that no peer answers); aborts a collective at once and a build's connections after
  // kStuckGrace (abortSuperseded returns false while it leaves a build for later); after twice
  // that, says the rank is wedged. Each does nothing once the training thread left `op`.
  void freeSupersededBuild(uint32_t op, bool firstLook);
  bool abortSuperseded(uint32_t op, bool buildToo);
  void reportWedged(uint32_t op, std::chrono::steady_clock::duration stuck);
  // Takes comm_ away (under commMutex_) and destroys it: a Gloo one on retiring_ (joined before
  // the next one and by the destructor), any other here.
  void dropComm();

  WorkerEnv env_;
  CommOptions options_;
  std::chrono::milliseconds failedBuildGrace_;
  std::unique_ptr<QuorumBoardReader> board_;
  std::unique_ptr<Store> store_;
  int64_t storeGeneration_ = -1;
  Endpoint storeEndpoint_;
  // Replaced and destroyed on the training thread under commMutex_, which the watchdog holds while
  // it aborts comm_ (the training thread reads comm_ without it: it is the only writer).
  std::mutex commMutex_;
  std::unique_ptr<Communicator> comm_;
  // Guarded by commMutex_: a communicator is being built, and the sockets open before it began.
  bool building_ = false;
  std::map<int, uint64_t> buildSockets_;  // detail::SocketTable
  class Guard;
  std::unique_ptr<Guard> guard_;  // comm() with a board
  // The watchdog's view of the training thread: the epoch the running collective started under
  // (kIdle: none).
  static constexpr uint32_t kIdle = 0xffffffffu;
  std::atomic<uint32_t> opEpoch_{kIdle};
  std::atomic<bool> stop_{false};
  std::thread watchdog_;
  std::thread retiring_;
  GroupView view_;
  uint32_t builtEpoch_ = 0;
  bool announced_ = false;  // this process counted itself (or was counted) in some generation
  std::string finishedBy_;  // set by checkFinished(): who finished the job, as its key says
};

}  // namespace ddp
