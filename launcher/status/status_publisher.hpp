// StatusPublisher: the agent's writer of what the status pages show (node_status.hpp has the
// formats; rendezvous/algorithm/detail/rendezvous_keys.hpp the keys):
//   - this node's status record of each generation, rewritten when a worker starts or exits and
//     when the generation ends;
//   - on node rank 0, the job's history (how the previous generation ended, with its root cause)
//     as each generation starts and when the job ends — with every generation this node took part
//     in that the history lacks (its node rank 0 died before writing it);
//   - on node rank 0, the metric relay: once a second, and at once when a generation ends (its
//     worker store lives until the next generation starts), it reads the points rank 0 of the
//     training wrote into this node's worker store (rendezvous/store/metric_points.hpp) and
//     rewrites the job's ring of the newest 256 in the rendezvous store when new ones came;
//   - with --straggler-threshold (settings.stragglers), on every node: each step tick (a tenth of
//     the window, 1 to 10 s) this node's ranks' compute figures in its record; node rank 0 reads
//     every node's record and adds the job's median to its own (O(nodes) reads a tick), every
//     other node reads node rank 0's record for it (one read), and each judges its own ranks and
//     logs each straggler found or recovered (status_steps.cpp; node_steps.hpp has the fields).
//
// All store traffic happens on the publisher's own thread and its own connections (budget 2 s a
// call), so a slow or lost store never delays the agent's supervision; the agent's calls only
// update fields under a lock and wake that thread. What fails is retried on the next tick and
// logged at debug (a status page is never worth a warning in a job's log). The connection to the
// rendezvous store is opened when there is something to write and closed once it sat idle for
// `idleClose`: an agent other than node rank 0 writes only when its workers start or exit and
// when a generation ends, so while its job runs it holds two connections to the store (its own
// and the heartbeat's), not three — unless straggler detection is on: it then writes every tick
// and keeps its own connection open while the generation runs.
//
// Thread safety: every public method may be called from any thread (the agent calls them from
// its own); finish() and the destructor join the thread.
#pragma once

#include <chrono>
#include <functional>
#include <condition_variable>
#include <cstdint>
#include <deque>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include "launcher/status/node_status.hpp"
#include "launcher/straggler/straggler_watch.hpp"
#include "rendezvous/algorithm/rendezvous.hpp"
#include "rendezvous/store/metric_points.hpp"
#include "rendezvous/store/store.hpp"

namespace ddp {

// A rank of this node newly flagged as a straggler (StatusPublisherSettings::onStraggler), with
// what a claim to leave the job needs.
struct StragglerFlagged {
  std::string line;          // the log line that flagged it
  int64_t incarnation = 0;   // the job's incarnation
  int64_t generation = 0;    // the running generation, and this node's place in it
  int nodeRank = 0;
  int nodeCount = 0;
};

struct StatusPublisherSettings {
  std::string runId;
  std::string host;
  int maxRestarts = 0;
  // Opens the publisher's connection to the rendezvous store.
  StoreConnector connect;
  // Budget of each store call and connection attempt.
  std::chrono::milliseconds budget{2000};
  // How often the relay reads the worker store.
  std::chrono::milliseconds relayInterval{1000};
  // How long the rendezvous store connection stays open with nothing to write.
  std::chrono::milliseconds idleClose{5000};
  // Straggler detection (--straggler-threshold), shared with the hang monitor that feeds it its
  // beats; null: off.
  std::shared_ptr<StragglerWatch> stragglers{};
  // Called on the publisher's thread, with its rendezvous store connection, for each rank of this
  // node newly flagged as a straggler (--exclude-stragglers). Must not block for long; may throw
  // Error (logged). Empty: nothing.
  std::function<void(const StragglerFlagged&, Store&)> onStraggler{};
};

class StatusPublisher {
 public:
  explicit StatusPublisher(StatusPublisherSettings settings);
  ~StatusPublisher();
  StatusPublisher(const StatusPublisher&) = delete;
  StatusPublisher& operator=(const StatusPublisher&) = delete;

  // This node is in `round`; `workerStoreAddr`:`workerStorePort` is the worker store it hosts
  // (node rank 0; workerStoreAddress(), store_access.hpp: the loopback address for one node, else
  // this node's advertised address, which the narrowed store is bound to), else port 0.
  // Non-blocking.
  void beginGeneration(const RendezvousResult& round, const std::string& workerStoreAddr,
                       uint16_t workerStorePort);
  // The generation's workers (WorkerGroup::states()). Non-blocking.
  void workers(const std::vector<WorkerState>& states);
  // The generation ended: `how` is node_status.hpp's end name. Non-blocking.
  void endGeneration(const std::string& how, const std::string& detail);
  // The job ended for this agent: publishes what is pending (the last history entry when this
  // node had node rank 0) and stops the thread. Blocks at most about twice the budget. Idempotent.
  void finish();

 private:
  struct Pending;
  void run();
  bool publish(Pending& work);
  void relay(Pending& work);
  void ensureStore();
  // Closes the rendezvous store connection when it sat idle for settings_.idleClose.
  void closeIdleStore();
  void queueHistory();  // under mutex_
  // Straggler detection's tick (status_steps.cpp): sets node.steps, judges, logs; keeps the fields
  // in node_ for later rewrites. Throws what the store throws.
  void publishSteps(const std::string& runId, int64_t incarnation, NodeStatus& node);
  std::chrono::milliseconds stepInterval() const;
  int64_t incarnation();

  StatusPublisherSettings settings_;
  std::mutex mutex_;
  std::condition_variable wake_;
  // Guarded by mutex_.
  NodeStatus node_;
  bool nodeDirty_ = false;
  // How the generations this node took part in ended (the newest kHistoryEntries), and the
  // entries to add to the history (node rank 0 only: those of ends_ the history lacks).
  std::deque<GenerationEnd> ends_;
  std::vector<GenerationEnd> historyPending_;
  std::string relayAddr_;
  uint16_t relayPort_ = 0;
  int64_t relayGeneration_ = -1;
  bool relayNow_ = false;  // a generation ended: read its worker store before it goes
  bool stopping_ = false;
  std::chrono::steady_clock::time_point nextSteps_{};  // the next straggler tick
  // The publisher's thread only.
  std::unique_ptr<Store> store_;
  std::chrono::steady_clock::time_point storeUsed_{};  // the last publish on store_
  std::unique_ptr<Store> workerStore_;
  std::string workerStoreAddr_;
  uint16_t workerStorePort_ = 0;
  MetricPointReader reader_;
  std::deque<std::string> ring_;
  std::optional<int64_t> ringIncarnation_;
  std::thread thread_;  // last: starts once the fields above exist
};

}  // namespace ddp
