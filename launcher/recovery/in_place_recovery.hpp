// InPlaceRecovery: what the agent does with a failed worker under --restart-scope=failed
// (docs/recovery.md; the decision table is restart_policy.hpp's decideInPlace).
//
// It is the supervisor's failure handler. When workers fail while their generation runs, a helper
// thread (the agent's own thread is in the supervisor's event loop) reads the worker store's
// in_place counter; when every worker of the generation recovers in place it spends one restart
// of the job budget (FailureLedger::recordRecovery, which publishes the failure record), makes the
// next quorum (QuorumKeeper) and hands the supervisor a new process for each failed local rank;
// the other workers — here and on every node — keep running and rebuild their communicator for
// the new quorum. Anything else (a worker that does not recover in place, the budget spent, the
// round ended, a store that does not answer) ends the generation as without in-place recovery.
//
// It is also the supervisor's round-end handler: when the rendezvous ends the running generation
// because a node was lost or one waits to join, and every worker recovers in place, this node's
// workers keep running while the helper joins the next round (hooks.nextRound: the agent's
// rendezvous, worker store and preflight steps); once the round formed, quorum 0 of the new
// generation goes on the board — the workers rebuild into it with their new ranks and world size —
// and the supervisor relabels the running workers. A node dropped from the round, a store lost,
// a restart requested, or a round that does not form in place ends the generation as before.
//
// With --restart-scope=all it does nothing (no board, no thread, no worker environment).
//
// Thread safety: construct, beginGeneration(), endGeneration() and destroy on the agent's thread;
// the handler runs on the supervisor's io thread (the same thread); the helper thread only calls
// the rendezvous, the keeper and GenerationControl::post().
#pragma once

#include <chrono>
#include <condition_variable>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <variant>
#include <vector>

#include "launcher/config/launch_config.hpp"
#include "launcher/recovery/generation_control.hpp"
#include "launcher/recovery/quorum_keeper.hpp"
#include "launcher/workers/worker_env_builder.hpp"
#include "rendezvous/algorithm/rendezvous.hpp"

namespace ddp {

// The next round, joined in place (InPlaceHooks::nextRound).
struct InPlaceRound {
  RendezvousResult round;
  WorkerStoreAddress store;
  RendezvousEvent ended;  // how the previous generation ended
};
// nextRound's answer when the round it joined ended before it was ready for the workers (a peer
// lost or a newcomer while its worker store or standby list was awaited): the workers, still in
// their generation, may wait for the round after it.
struct InPlaceRoundEnded {
  RendezvousEvent event;
  int nodeRank = -1;  // this node's rank in the round that ended
};
// nextRound's answer when the workers cannot go on in place: why (the job ended, ...).
struct NotInPlace {
  std::string why;
};
using NextInPlace = std::variant<InPlaceRound, InPlaceRoundEnded, NotInPlace>;

struct StandbyPlan {
  WorkerSpec spec;  // local rank 0's replacement: the argv and the environment the job runs with
  int count = 1;
};

struct InPlaceHooks {
  GenerationControl& supervisor;  // the agent's Supervisor
  // The agent's current rendezvous (it changes when the store fails over).
  std::function<Rendezvous&()> rendezvous;
  // The spec of a new process for local rank `localRank` of the running generation, replacing a
  // failed one in quorum `quorum` (its error file must not be the failed worker's).
  std::function<WorkerSpec(int localRank, int64_t quorum)> replacementSpec;
  std::string host;
  int maxRestarts = 0;  // for the log line
  // Joins the next round for workers that keep running: the round and its worker store, the
  // round's end when it ended before it was ready (InPlaceRecovery then joins the next one, at
  // most kRoundsPassed times in a row), or why the workers cannot go on in place (the job ended,
  // ...). Called on the helper thread; the agent's thread is in the supervisor's loop meanwhile.
  // May throw Error.
  std::function<NextInPlace()> nextRound;
  // After the board shows the new round's quorum 0 (helper thread): what else the round needs
  // from this node before it trains (the preflight report). Empty: nothing. May throw Error.
  std::function<void(const InPlaceRound&)> afterBoard;
  // io thread, before the supervisor relabels the workers: the agent adopts the round (its
  // state, logs, status pages); returns every local worker's spec in it.
  std::function<std::vector<WorkerSpec>(const InPlaceRound&)> adopt;
  // io thread, once every worker of a generation can wait as a standby process: the spec standby
  // processes start from (worker_runtime/standby.hpp) and how many to keep, or nullopt for none
  // (with `why` set when that deserves a line in the log).
  std::function<std::optional<StandbyPlan>(std::string& why)> standbySpec;
  // Helper thread, before a replacement: counts the failure against this node (bad-node
  // exclusion, failure_window.hpp) and returns the reason of a granted claim to leave the job
  // instead (then the failure is recorded, no worker is replaced, and the generation ends for this
  // node), or "" to replace as usual. Empty: never. May throw Error.
  std::function<std::string(const std::vector<WorkerFailure>&)> leaveInstead;
  // Helper thread, before a replacement: the verdict (verdict.hpp) on the job's attempts with
  // these failures as the next one, or "" (none, or --verdict-after=0). A verdict ends the
  // generation instead of replacing: the agent then reports it as for any generation's end.
  // Empty: never. May throw Error.
  std::function<std::string(const std::vector<WorkerFailure>&)> verdictInstead;
};

class InPlaceRecovery {
 public:
  // A replacement that fails before it joined (built a communicator: the worker store's joined
  // counter of its rank did not move, worker_store_keys.hpp) failed at start; the next
  // replacement of its local rank waits kFirstBackoff, doubled for each such failure in a row, at
  // most kMaxBackoff (far below any worker's wait for a new quorum), so the agent never replaces
  // faster than it learns. A replacement that joined ends its rank's run, however soon it fails
  // after (a storm's kills come seconds apart); so does a generation formed in place meanwhile.
  static constexpr std::chrono::milliseconds kFirstBackoff{250};
  static constexpr std::chrono::milliseconds kMaxBackoff{std::chrono::seconds(8)};
  // Rounds that may end before they are ready, one after another, while the workers keep running
  // (a storm of nodes lost and joining); one more restarts every worker.
  static constexpr int kRoundsPassed = 8;

  // Throws Error when the board cannot be created (scope failed only).
  InPlaceRecovery(RestartScope scope, int localWorkers, InPlaceHooks hooks);
  ~InPlaceRecovery();
  InPlaceRecovery(const InPlaceRecovery&) = delete;
  InPlaceRecovery& operator=(const InPlaceRecovery&) = delete;

  bool enabled() const { return keeper_ != nullptr; }

  // Adds what every worker needs (DDP_QUORUM_BOARD, DDP_QUORUM_SLOT) to `env`.
  void addEnvironment(EnvMap& env, int localRank) const;
  // Before `round`'s workers start (worker store at `store`): quorum 0 on the board, the watcher.
  // Throws what QuorumKeeper::beginGeneration throws.
  void beginGeneration(const RendezvousResult& round, const WorkerStoreAddress& store);
  // The generation ended: waits for a decision in flight, stops the watcher. Never throws.
  void endGeneration();

 private:
  bool take(const std::vector<WorkerFailure>& failures);
  // The back-off before replacing `failures` (see kFirstBackoff), from what their ranks' joined
  // counters say; takes the counters as the next replacements' baseline. Throws what
  // QuorumKeeper::joinedCount throws.
  std::chrono::milliseconds backoffFor(const std::vector<WorkerFailure>& failures);
  void noteReplaced(const std::vector<WorkerFailure>& failures);
  // Waits `delay` on the helper thread; false when the generation ends meanwhile.
  bool pause(std::chrono::milliseconds delay);
  bool takeRoundEnd(const RendezvousEvent& event);
  void moveOn(RendezvousEvent event);
  void decide(std::vector<WorkerFailure> failures, bool workerFinished);

  const RestartScope scope_;
  InPlaceHooks hooks_;
  std::unique_ptr<QuorumKeeper> keeper_;
  RendezvousResult round_;
  std::thread helper_;
  // Back-off (helper thread; reset by beginGeneration): per local rank, the generation and
  // joined count its last replacement started with, whether one started, and how many
  // replacements of it in a row failed at start.
  struct Streak {
    int64_t generation = -1;
    int64_t joinedBefore = 0;
    bool replaced = false;
    int failedAtStart = 0;
  };
  std::map<int, Streak> streaks_;
  std::mutex pauseMutex_;
  std::condition_variable pauseCv_;
  bool ending_ = false;  // guarded by pauseMutex_
};

}  // namespace ddp
