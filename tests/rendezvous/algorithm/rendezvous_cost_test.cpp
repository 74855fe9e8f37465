// The cost of a round: N agents joining one round do O(N) store work in total. Every agent but
// two reads O(1) bytes in O(1) requests (its own assignment, never the roster of all members);
// node rank 0 (its watch list) and the closing agent (the join records) read O(N) once. When the
// last-call leader stops, one backup closes the round, not every agent.
// Agents are threads over one InMemoryStore, each through its own counting wrapper; heartbeats go
// through connections of their own, so only next() is counted.
#include <catch2/catch.hpp>

#include <algorithm>
#include <atomic>
#include <future>
#include <memory>

#include "tests/rendezvous/algorithm/pausable_store.hpp"
#include "rendezvous/store/in_memory_store.hpp"
#include "rendezvous/store/prefix_store.hpp"
#include "tests/rendezvous/rendezvous_harness.hpp"

using namespace ddp;
using namespace ddp::test;

namespace {

// Counts requests and the bytes of the values they return.
class CountingStore final : public Store {
 public:
  explicit CountingStore(Store& base) : base_(base) {}
  int64_t requests() const { return requests_; }
  int64_t bytesRead() const { return bytes_; }

  void set(const std::string& k, const std::string& v) override { hit(); base_.set(k, v); }
  std::string get(const std::string& k) override { return read(base_.get(k)); }
  int64_t add(const std::string& k, int64_t d) override { hit(8); return base_.add(k, d); }
  std::string compareSet(const std::string& k, const std::string& e,
                         const std::string& d) override {
    return read(base_.compareSet(k, e, d));
  }
  void wait(const std::vector<std::string>& k, std::chrono::milliseconds t) override {
    hit();
    base_.wait(k, t);
  }
  bool check(const std::vector<std::string>& k) override { hit(); return base_.check(k); }
  bool deleteKey(const std::string& k) override { hit(); return base_.deleteKey(k); }
  int64_t numKeys() override { hit(); return base_.numKeys(); }
  std::vector<std::string> multiGet(const std::vector<std::string>& k) override {
    auto values = base_.multiGet(k);
    for (const auto& v : values) bytes_ += static_cast<int64_t>(v.size());
    hit();
    return values;
  }
  void multiSet(const std::vector<std::string>& k, const std::vector<std::string>& v) override {
    hit();
    base_.multiSet(k, v);
  }
  void append(const std::string& k, const std::string& v) override { hit(); base_.append(k, v); }
  std::chrono::milliseconds timeout() const override { return base_.timeout(); }
  void setTimeout(std::chrono::milliseconds t) override { base_.setTimeout(t); }

 private:
  void hit(int64_t bytes = 0) {
    ++requests_;
    bytes_ += bytes;
  }
  std::string read(std::string value) {
    hit(static_cast<int64_t>(value.size()));
    return value;
  }
  Store& base_;
  std::atomic<int64_t> requests_{0};
  std::atomic<int64_t> bytes_{0};
};

struct Cost {
  int64_t maxRequests = 0;  // of any agent but node rank 0 and the closer
  int64_t maxBytes = 0;     // likewise
  int64_t totalRequests = 0;
  int64_t totalBytes = 0;
};

StoreConnector ownConnection(Store& backing) {
  return [&backing](std::chrono::milliseconds) {
    return std::make_unique<PrefixStore>("", backing);
  };
}

Cost joinRound(int n) {
  InMemoryStore backing;
  std::vector<std::unique_ptr<CountingStore>> stores;
  std::vector<std::unique_ptr<Agent>> agents;
  std::vector<Agent*> ptrs;
  auto settings = fastSettings("cost-" + std::to_string(n), n, n);
  for (int i = 0; i < n; ++i) {
    stores.push_back(std::make_unique<CountingStore>(backing));
    agents.push_back(std::make_unique<Agent>(*stores.back(), settings,
                                             node("host-" + std::to_string(i)),
                                             ownConnection(backing)));
    ptrs.push_back(agents.back().get());
  }
  const auto results = joinAll(ptrs);
  checkConsistent(results);
  // The closer drew the last slot: the agent that made the most requests.
  size_t closer = 0;
  for (size_t i = 0; i < stores.size(); ++i) {
    if (stores[i]->requests() > stores[closer]->requests()) closer = i;
  }
  Cost c;
  for (size_t i = 0; i < stores.size(); ++i) {
    c.totalRequests += stores[i]->requests();
    c.totalBytes += stores[i]->bytesRead();
    if (i == closer || results[i].nodeRank == 0) continue;
    c.maxRequests = std::max(c.maxRequests, stores[i]->requests());
    c.maxBytes = std::max(c.maxBytes, stores[i]->bytesRead());
  }
  // The job ends: every per-agent key (join records, assignments, heartbeats) goes with it.
  std::vector<std::future<ExitBarrierResult>> exits;
  for (auto& a : agents) {
    exits.push_back(std::async(std::launch::async, [&a] { return a->rdzv->exitBarrier(20s); }));
  }
  for (auto& e : exits) CHECK(std::holds_alternative<AllSucceeded>(e.get()));
  for (auto& a : agents) a->rdzv->leave();
  CHECK(backing.numKeys() == 2);  // inc, ended
  return c;
}

}  // namespace

TEST_CASE("a round of N agents is O(N) store work; each agent reads O(1)", "[rendezvous][cost]") {
  const Cost small = joinRound(16);
  const Cost large = joinRound(128);
  INFO("16 agents: " << small.totalRequests << " requests, " << small.totalBytes << " bytes; "
       "128 agents: " << large.totalRequests << " requests, " << large.totalBytes << " bytes");
  // An agent's own cost does not grow with N (reading every member's record would: ~60 bytes
  // each).
  CHECK(large.maxRequests <= 12);
  CHECK(large.maxBytes <= 256);
  CHECK(large.maxBytes <= small.maxBytes + 16);
  // In total: linear in N, the closer's and node rank 0's O(N) included.
  CHECK(large.totalRequests <= 16 * 128);
  CHECK(large.totalBytes <= 300 * 128);
}

TEST_CASE("a stopped last-call leader: the next slot's agent closes the round, nobody else reads "
          "the join records", "[rendezvous][cost]") {
  constexpr int kAgents = 12;
  InMemoryStore backing;
  auto settings = fastSettings("backup", 2, 32);
  settings.heartbeatTimeout = 1s;
  const std::string round = "rdzv/backup/0/r/0/";
  PausableStore leaderStore(backing);
  std::vector<std::unique_ptr<CountingStore>> stores;
  std::vector<std::unique_ptr<Agent>> agents;
  for (int i = 0; i < kAgents; ++i) {
    Store& base = i == 1 ? static_cast<Store&>(leaderStore) : backing;
    stores.push_back(std::make_unique<CountingStore>(base));
    agents.push_back(std::make_unique<Agent>(*stores.back(), settings, node("n" + std::to_string(i)),
                                             ownConnection(backing)));
  }
  std::vector<std::future<RendezvousResult>> joins;
  auto start = [&](int i) {
    joins.push_back(
        std::async(std::launch::async, [&, i] { return joined(agents[i]->rdzv->next()); }));
  };
  // Agent 0 draws slot 1, agent 1 slot 2 (min_nodes: the leader); the leader then stops.
  start(0);
  backing.wait({round + "node/1"}, 5s);
  start(1);
  backing.wait({round + "node/2"}, 5s);
  leaderStore.pause();
  for (int i = 2; i < kAgents; ++i) {
    start(i);
    backing.wait({round + "node/" + std::to_string(i + 1)}, 5s);
  }
  // The agent of slot 3 takes over one heartbeat_timeout after the last call; the round forms
  // with every record, the stopped leader's too.
  std::vector<RendezvousResult> results(kAgents);
  for (int i = 0; i < kAgents; ++i) {
    if (i == 1) continue;
    REQUIRE(joins[i].wait_for(20s) == std::future_status::ready);
    results[i] = joins[i].get();
    CHECK(results[i].nodeCount == kAgents);
  }
  leaderStore.resume();
  results[1] = joins[1].get();
  checkConsistent(results);
  CHECK(backing.get(round + "closer").rfind("n2/", 0) == 0);  // slot 3: the first backup
  int readers = 0;
  for (const auto& store : stores) readers += store->bytesRead() > 400 ? 1 : 0;
  CHECK(readers <= 2);  // the closer, and node rank 0 (its watch list); not every agent
}
