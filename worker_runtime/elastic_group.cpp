#include "worker_runtime/elastic_group.hpp"

#include <signal.h>

#include <algorithm>
#include <atomic>
#include <functional>
#include <mutex>
#include <optional>

#include <spdlog/spdlog.h>

#include "rendezvous/base/error.hpp"
#include "rendezvous/base/logging.hpp"
#include "rendezvous/quorum/quorum_board.hpp"
#include "rendezvous/store/worker_store_keys.hpp"
#include "worker_runtime/detail/socket_scan.hpp"
#include "worker_runtime/detail/superseded_store.hpp"
#include "worker_runtime/standby.hpp"
#include "worker_runtime/worker_store.hpp"

namespace ddp {
namespace {

using Clock = std::chrono::steady_clock;

}  // namespace

// comm() with a board: every collective first checks that the board still shows the quorum it was
// built for, and tells the watchdog it runs.
class ElasticGroup::Guard final : public Communicator {
 public:
  explicit Guard(ElasticGroup& group) : g_(group) {}
  int rank() const override { return g_.comm_->rank(); }
  int size() const override { return g_.comm_->size(); }
  CommBackend backend() const override { return g_.comm_->backend(); }
  void allreduce(void* buf, std::size_t count, DataType type, ReduceOp op) override {
    run("allreduce", [&] { g_.comm_->allreduce(buf, count, type, op); });
  }
  void broadcast(void* buf, std::size_t bytes, int root) override {
    run("broadcast", [&] { g_.comm_->broadcast(buf, bytes, root); });
  }
  void barrier() override {
    run("barrier", [&] { g_.comm_->barrier(); });
  }
  void allgather(const void* send, void* recv, std::size_t n, DataType type) override {
    run("allgather", [&] { g_.comm_->allgather(send, recv, n, type); });
  }
  void reduceScatter(const void* send, void* recv, std::size_t n, DataType type,
                     ReduceOp op) override {
    run("reduce-scatter", [&] { g_.comm_->reduceScatter(send, recv, n, type, op); });
  }
  void send(const void* buf, std::size_t bytes, int peer) override {
    run("send", [&] { g_.comm_->send(buf, bytes, peer); });
  }
  void recv(void* buf, std::size_t bytes, int peer) override {
    run("receive", [&] { g_.comm_->recv(buf, bytes, peer); });
  }
  void setStream(void* stream) override { g_.comm_->setStream(stream); }

 private:
  template <class F>
  void run(const char* op, F&& fn) {
    if (!g_.comm_) throw CommError(std::string(op) + ": the group is being rebuilt");
    if (g_.quorumChanged()) {
      throw CommError(std::string(op) + " on rank " + std::to_string(g_.view_.rank) + " of quorum " +
                      toString(g_.view_.id) + ": the agent published a newer quorum");
    }
    g_.opEpoch_.store(g_.builtEpoch_, std::memory_order_release);
    struct Done {
      std::atomic<uint32_t>& e;
      ~Done() { e.store(kIdle, std::memory_order_release); }
    } done{g_.opEpoch_};
    fn();
  }
  ElasticGroup& g_;
};

namespace {

GroupView viewOf(const QuorumRecord& r) {
  GroupView view;
  view.layout() = r.layout();
  view.id = r.id;
  view.replaced = r.replaced;
  view.reason = r.reason;
  return view;
}

GroupView viewOf(const WorkerEnv& env) {
  GroupView view;
  view.layout() = env.layout();
  view.id = {env.restartCount, 0};
  return view;
}

// The record a worker started without a board would have had.
QuorumRecord recordOf(const WorkerEnv& env) {
  QuorumRecord r;
  r.layout() = env.layout();
  r.id = {env.restartCount, 0};
  r.master = env.master;
  return r;
}

std::unique_ptr<QuorumBoardReader> openBoard(const WorkerEnv& env) {
  if (env.quorumBoard.empty()) return nullptr;
  try {
    return std::make_unique<QuorumBoardReader>(env.quorumBoard, env.quorumSlot);
  } catch (const Error& e) {
    logger("worker")->warn("rank {}: {}; this worker does not recover in place (a failure "
                           "restarts every worker)", env.rank, e.what());
    return nullptr;
  }
}

}  // namespace

ElasticGroup::ElasticGroup(const WorkerEnv& env, const CommOptions& options,
                           std::chrono::milliseconds failedBuildGrace)
    : env_(env), options_(options), failedBuildGrace_(failedBuildGrace), board_(openBoard(env)) {
  // A write to a peer that is gone (Gloo's writev to a killed rank) must fail that collective,
  // not kill this process with SIGPIPE: that is what lets it recover (and what names it collateral
  // in the failure summary when it cannot). A handler the program installed is left alone.
  struct sigaction current {};
  if (::sigaction(SIGPIPE, nullptr, &current) == 0 && current.sa_handler == SIG_DFL) {
    ::signal(SIGPIPE, SIG_IGN);
  }
  const QuorumRecord started = recordOf(env);
  if (!board_) {
    build(started, Clock::now() + options_.timeout);
    return;
  }
  view_ = viewOf(env);  // until the first quorum is built: the watchdog's log lines name it
  // The watchdog runs from the first build on: a replacement process building a quorum that a
  // newer one superseded (its peer killed in turn) would otherwise wait in Gloo's connect.
  watchdog_ = std::thread([this] { watchdog(); });
  try {
    // A replacement process starts in the quorum the agent published for it; a worker started
    // with its generation finds the record of quorum 0 (or a newer one).
    join(started.id, /*newer=*/false, options_.timeout, &started);
  } catch (...) {
    stop_ = true;
    watchdog_.join();
    if (retiring_.joinable()) retiring_.join();
    throw;
  }
  guard_ = std::make_unique<Guard>(*this);
}

Communicator& ElasticGroup::comm() {
  if (guard_) return *guard_;
  return *comm_;
}

ElasticGroup::~ElasticGroup() {
  stop_ = true;
  if (watchdog_.joinable()) watchdog_.join();
  if (retiring_.joinable()) retiring_.join();
}

bool ElasticGroup::joinedLate() const {
  if (board_ && env_.stateFromPeer) return true;
  return std::find(view_.replaced.begin(), view_.replaced.end(), view_.rank) != view_.replaced.end();
}

bool ElasticGroup::quorumChanged() const {
  return board_ != nullptr && board_->epoch() != builtEpoch_;
}

const std::atomic<uint32_t>* ElasticGroup::quorumEpoch() const {
  return board_ ? &board_->epochWord() : nullptr;
}

void ElasticGroup::markStateLost() {
  if (!board_) return;
  try {
    unprefixed(*store_).set(stateLostKey(view_.id.generation), toString(view_.id));
  } catch (const Error& e) {
    logger("worker")->warn("could not tell the agents that the state is lost: {}", e.what());
  }
}

void ElasticGroup::markFinished() {
  if (!board_) return;
  try {
    unprefixed(*store_).set(finishedKey(view_.id.generation),
                            "rank " + std::to_string(view_.rank) + " of quorum " + toString(view_.id));
  } catch (const Error& e) {
    logger("worker")->warn("could not tell the agents that this rank finished: {}", e.what());
  }
}

void ElasticGroup::checkFinished(const QuorumId& building) {
  Store& shared = unprefixed(*store_);
  const std::string key = finishedKey(building.generation);
  if (!shared.check({key})) return;
  finishedBy_ = shared.get(key);
  throw CommError(finishedBy_ + " finished the job while quorum " + toString(building) +
                  " was being built");
}

void ElasticGroup::announceInPlace() {
  if (!board_ || announced_) return;
  announced_ = true;
  // A replacement was counted for its rank by its predecessor (or by the agent that carried the
  // predecessor into a generation formed in place); a process that goes on into a generation
  // formed in place is carried by its agent (quorum_keeper.hpp): once per process. It says that
  // it joined instead: its agent then knows it did not fail at start (in_place_recovery.hpp).
  if (env_.stateFromPeer) {
    unprefixed(*store_).add(joinedCountKey(view_.id.generation, view_.rank), 1);
    return;
  }
  // The key is the agents' (worker_store_keys.hpp): no worker prefix, on the same connection.
  // A program that can wait as a standby says so first: an agent that sees in_place complete
  // then knows whether every worker can (worker_runtime/standby.hpp).
  if (standbyCapable()) unprefixed(*store_).add(standbyCountKey(view_.id.generation), 1);
  unprefixed(*store_).add(inPlaceCountKey(view_.id.generation), 1);
}

void ElasticGroup::build(const QuorumRecord& record, Clock::time_point deadline) {
  const auto budget = std::max(std::chrono::milliseconds(1),
      std::chrono::duration_cast<std::chrono::milliseconds>(deadline - Clock::now()));
  if (!store_ || record.id.generation != storeGeneration_ ||
      storeEndpoint_ != record.master) {
    store_.reset();
    WorkerEnv env = env_;
    env.master = record.master;
    env.restartCount = int(record.id.generation);
    env.useAgentStore = env_.useAgentStore || board_ != nullptr;
    store_ = connectWorkerStore(env, std::min(budget, options_.timeout));
    storeGeneration_ = record.id.generation;
    storeEndpoint_ = record.master;
  }
  WorkerEnv env = env_;
  env.layout() = record.layout();
  env.master = record.master;
  env.restartCount = int(record.id.generation);
  CommOptions options = options_;
  if (board_) options.storePrefix = options_.storePrefix + "/q" + std::to_string(record.id.quorum);
  options.timeout = std::min(budget, options_.timeout);
  std::function<void()> finished;
  if (board_) finished = [this, &record] { checkFinished(record.id); };
  detail::SupersededStore watched(*store_, board_.get(), builtEpoch_, std::move(finished));
  std::unique_ptr<Communicator> comm;
  {
    // The watchdog sees the build as an operation of this quorum: superseded, its pairs still
    // listening are shut down at once, and 2 s later the connections it opened.
    std::unique_lock<std::mutex> lock(commMutex_);
    buildSockets_ = detail::socketDescriptors();
    building_ = true;
    lock.unlock();
    opEpoch_.store(builtEpoch_, std::memory_order_release);
    struct Done {
      ElasticGroup& g;
      ~Done() {
        g.opEpoch_.store(kIdle, std::memory_order_release);
        std::lock_guard<std::mutex> lock(g.commMutex_);
        g.building_ = false;
      }
    } done{*this};
    comm = makeCommunicator(env, watched, options);
  }
  {
    std::lock_guard<std::mutex> lock(commMutex_);  // the watchdog reads view_ under it
    comm_ = std::move(comm);
    view_ = board_ ? viewOf(record) : viewOf(env);
  }
  announceInPlace();
}

void ElasticGroup::dropComm() {
  std::unique_ptr<Communicator> old;
  {
    std::lock_guard<std::mutex> lock(commMutex_);
    old = std::move(comm_);
  }
  if (!old) return;
  if (old->backend() != CommBackend::kGloo) return;  // NCCL: aborted and freed here, as before
  // Gloo closes its pairs one at a time, each waiting for a tick of its event loop (which wakes
  // every 10 ms): 20-30 ms on a loaded CPU, which this rank spends building the next communicator
  // instead; the retiring thread closes them meanwhile. (Not by abort(): its descriptors are
  // found by scanning, and in a process of several ranks they may be another's.) A closing
  // socket only ever leaves the set the next build's scans start from, so they find no stranger;
  // a new socket that gets a number one of them had is still told apart (by its inode).
  if (retiring_.joinable()) retiring_.join();
  retiring_ = std::thread([comm = std::move(old)]() mutable { comm.reset(); });
}

const GroupView& ElasticGroup::rebuild(std::chrono::milliseconds budget) {
  dropComm();  // first: peers still blocked on it fail now and come to rebuild too
  if (!board_) {
    throw CommError("rank " + std::to_string(view_.rank) +
                    ": no quorum board (not started by ddprun --restart-scope=failed), so no "
                    "recovery in place");
  }
  const int wasRank = view_.rank;
  const QuorumId had = view_.id;
  join(had, /*newer=*/true, budget, nullptr);
  logger("worker")->info("rank {} of quorum {} is rank {} of quorum {} (world size {}){}", wasRank,
                         toString(had), view_.rank, toString(view_.id), view_.worldSize,
                         view_.reason.empty() ? "" : ": " + view_.reason);
  return view_;
}

void ElasticGroup::join(const QuorumId& from, bool newer, std::chrono::milliseconds budget,
                        const QuorumRecord* fallback) {
  const auto deadline = Clock::now() + budget;
  std::optional<QuorumId> failed;  // a quorum whose build failed is not tried again
  // When the newest quorum's build failed (none newer since): the grace runs from there.
  std::optional<Clock::time_point> failedAt;
  int failedRank = view_.rank;  // this rank's number in that quorum
  std::string lastError = "no newer quorum was published";
  while (true) {
    const uint32_t epoch = board_->epoch();
    std::optional<QuorumRecord> newest;
    try {
      newest = board_->read();
    } catch (const ProtocolError& e) {
      throw CommError("rank " + std::to_string(view_.rank) + ": " + e.what());
    }
    // Without a record yet (the agent publishes quorum 0 as it starts the workers), the env's.
    if (!newest && fallback != nullptr) newest = *fallback;
    const bool usable = newest && (newer ? newest->id > from : newest->id >= from) &&
                        (!failed || newest->id > *failed);
    if (usable) {
      failedAt.reset();  // a newer quorum: its own attempt
      builtEpoch_ = epoch;
      try {
        build(*newest, deadline);
        return;
      } catch (const Error& e) {
        dropComm();
        // A rank finished the job: no quorum of this generation can form any more.
        if (!finishedBy_.empty()) {
          throw CommError("rank " + std::to_string(newest->rank) + ": " + finishedBy_ +
                          " finished the job while this rank waited to build quorum " +
                          toString(newest->id) + ": that quorum cannot form");
        }
        lastError = "quorum " + toString(newest->id) + ": " + e.what();
        // Superseded (the board moved meanwhile) is no failure of that quorum.
        if (board_->epoch() == epoch) {
          failed = newest->id;
          failedAt = Clock::now();
          failedRank = newest->rank;
          logger("worker")->warn("rank {} could not build {}; waiting for a newer quorum",
                                 newest->rank, lastError);
        }
      }
    }
    const auto now = Clock::now();
    if (failedAt && now - *failedAt >= failedBuildGrace_) {
      throw CommError("rank " + std::to_string(failedRank) + " could not build " + lastError +
                      ", and no newer quorum came within " +
                      std::to_string(failedBuildGrace_.count()) +
                      " ms; this process exits so that its agent replaces it");
    }
    if (now >= deadline) {
      throw CommError("rank " + std::to_string(view_.rank) + " of quorum " + toString(from) +
                      " found no quorum to " + (newer ? "recover into" : "join") + " within " +
                      std::to_string(budget.count()) + " ms: " + lastError);
    }
    auto until = deadline;
    if (failedAt) until = std::min(until, *failedAt + failedBuildGrace_);
    const auto left = std::max(std::chrono::milliseconds(1),
        std::chrono::ceil<std::chrono::milliseconds>(until - now));
    if (board_->epoch() == epoch) board_->waitForChange(epoch, left);
  }
}

}  // namespace ddp
