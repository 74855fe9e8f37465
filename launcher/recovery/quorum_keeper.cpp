#include "launcher/recovery/quorum_keeper.hpp"

#include <algorithm>
#include <random>

#include <nlohmann/json.hpp>

#include "rendezvous/base/error.hpp"
#include "rendezvous/base/logging.hpp"
#include "rendezvous/store/tcp_store_client.hpp"
#include "rendezvous/store/worker_store_keys.hpp"

namespace ddp {
namespace {

// The watcher's budget for each reply (its waits have their own). An interrupted wait (the
// generation ended) is cancelled within it: a worker store cut off by the network must not hold
// the agent's end of the generation for the whole connection budget.
constexpr std::chrono::milliseconds kWatcherReplyBudget{std::chrono::seconds(5)};

using nlohmann::json;

std::string encodeChange(const QuorumChange& c, uint64_t claim) {
  return json{{"reason", c.reason}, {"replaced", c.replaced}, {"node", c.node}, {"claim", claim}}
      .dump();
}

QuorumChange decodeChange(const QuorumId& id, const std::string& text) {
  const json j = json::parse(text, nullptr, false);
  QuorumChange c;
  c.id = id;
  if (!j.is_object()) {
    c.reason = "(unreadable quorum record in the worker store)";
    return c;
  }
  c.reason = j.value("reason", std::string());
  c.node = j.value("node", -1);
  if (j.contains("replaced") && j["replaced"].is_array()) {
    for (const auto& r : j["replaced"]) {
      if (r.is_number_integer()) c.replaced.push_back(r.get<int>());
    }
  }
  return c;
}

}  // namespace

QuorumKeeper::QuorumKeeper(int localWorkers) : board_(localWorkers), localWorkers_(localWorkers) {}

QuorumKeeper::~QuorumKeeper() { endGeneration(); }

void QuorumKeeper::beginGeneration(const RendezvousResult& round, const std::string& addr,
                                   uint16_t port, const std::string& token,
                                   std::chrono::milliseconds budget, bool inherited) {
  endGeneration();
  TcpStoreClientOptions o;
  o.endpoint = {addr, port};
  o.token = token;
  o.connectTimeout = budget;
  o.timeout = budget;
  calls_ = std::make_unique<TcpStoreClient>(o);
  o.timeout = std::min(budget, kWatcherReplyBudget);
  watcher_ = std::make_unique<TcpStoreClient>(o);
  if (inherited) {  // before the board shows the generation: no worker of it can fail earlier
    if (standbyCapable_) calls_->add(standbyCountKey(round.generation), localWorkers_);
    calls_->add(inPlaceCountKey(round.generation), localWorkers_);
    calls_->set(inPlaceCarriedKey(round.generation), "1");
  } else {
    standbyCapable_ = false;
  }
  {
    std::lock_guard<std::mutex> lock(mutex_);
    round_ = round;
    master_ = o.endpoint;
    current_ = {-1, -1};
    publishLocked({{round.generation, 0}, "", {}, -1});
  }
  stop_ = false;
  inherited_ = inherited;
  allInPlace_ = inherited;
  thread_ = std::thread([this] { watch(); });
}

void QuorumKeeper::endGeneration() {
  stop_ = true;
  if (watcher_) watcher_->interruptWait();
  if (thread_.joinable()) thread_.join();
  watcher_.reset();
  calls_.reset();
}

QuorumId QuorumKeeper::current() const {
  std::lock_guard<std::mutex> lock(mutex_);
  return current_;
}

void QuorumKeeper::onAllInPlace(std::function<void(bool standbyCapable)> callback) {
  allInPlaceCallback_ = std::move(callback);
}

int64_t QuorumKeeper::workersInPlace() {
  if (!calls_) throw Error("no generation is running");
  if (inherited_ || calls_->check({inPlaceCarriedKey(round_.generation)})) return round_.worldSize;
  return calls_->add(inPlaceCountKey(round_.generation), 0);
}

int64_t QuorumKeeper::joinedCount(int rank) {
  if (!calls_) throw Error("no generation is running");
  return calls_->add(joinedCountKey(round_.generation, rank), 0);
}

bool QuorumKeeper::stateLost() {
  if (!calls_) throw Error("no generation is running");
  return calls_->check({stateLostKey(round_.generation)});
}

bool QuorumKeeper::workerFinished() {
  if (!calls_) throw Error("no generation is running");
  return calls_->check({finishedKey(round_.generation)});
}

void QuorumKeeper::publishLocked(const QuorumChange& change) {
  if (change.id <= current_) return;
  std::vector<std::pair<int, QuorumRecord>> records;
  for (int lr = 0; lr < localWorkers_; ++lr) {
    QuorumRecord r;
    r.layout() = layoutOf(round_, lr, localWorkers_);
    r.id = change.id;
    r.master = master_;
    r.reason = change.reason;
    r.replaced = change.replaced;
    records.emplace_back(lr, std::move(r));
  }
  board_.publish(records);
  current_ = change.id;
}

QuorumChange QuorumKeeper::makeQuorum(const std::vector<int>& replaced, const std::string& reason) {
  if (!calls_) throw Error("no generation is running");
  std::random_device rd;
  const uint64_t claim = (uint64_t(rd()) << 32) | rd();
  QuorumChange change;
  change.reason = reason;
  change.replaced = replaced;
  change.id = current();
  change.node = round_.nodeRank;
  const std::string mine = encodeChange(change, claim);
  // The next free number; a number taken by another agent is its quorum (the watcher relays it).
  for (change.id.quorum += 1;; ++change.id.quorum) {
    const std::string key = quorumKey(change.id.generation, change.id.quorum);
    if (calls_->compareSet(key, "", mine) == mine) break;
  }
  {
    std::lock_guard<std::mutex> lock(mutex_);
    publishLocked(change);
  }
  return change;
}

void QuorumKeeper::watch() {
  const int64_t g = round_.generation;
  auto log = logger("agent");
  while (!stop_) {
    const int64_t next = current().quorum + 1;
    const std::string key = quorumKey(g, next);
    try {
      const int64_t inPlace = allInPlace_ ? 0 : watcher_->add(inPlaceCountKey(g), 0);
      // Formed in place by other nodes: their processes carried on (and the job runs one entry
      // point), so this node's newcomers recover in place too, before each of them announced.
      const bool carried = inPlace > 0 && watcher_->check({inPlaceCarriedKey(g)});
      if (!allInPlace_ && (inPlace >= round_.worldSize || carried)) {
        // Each worker (and agent carrying its workers) adds to the standby counter before
        // in_place: it is complete for those counted now.
        const int64_t standbys = watcher_->add(standbyCountKey(g), 0);
        const bool standby = standbys >= (carried ? inPlace : round_.worldSize);
        standbyCapable_ = standby;
        allInPlace_ = true;
        if (allInPlaceCallback_) allInPlaceCallback_(standby);
      }
      // Short waits while the workers still announce themselves, long ones after.
      watcher_->wait({key}, allInPlace_ ? std::chrono::seconds(30) : std::chrono::milliseconds(100));
      if (stop_) return;
      const QuorumChange change = decodeChange({g, next}, watcher_->get(key));
      std::lock_guard<std::mutex> lock(mutex_);
      publishLocked(change);
    } catch (const TimeoutError&) {
      // Nothing new (or interrupted by endGeneration): wait again.
    } catch (const Error& e) {
      if (!stop_) {
        log->warn("stopped watching generation {}'s quorums in the worker store: {}", g, e.what());
      }
      return;
    }
  }
}

}  // namespace ddp
