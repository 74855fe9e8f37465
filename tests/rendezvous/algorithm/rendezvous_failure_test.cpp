// Failures: lost peers (an agent that stops heartbeating without leave()), the shared restart
// budget, the exit barrier, and store faults injected by a wrapping store.
#include <catch2/catch.hpp>

#include <atomic>
#include <future>

#include "rendezvous/store/in_memory_store.hpp"
#include "tests/rendezvous/rendezvous_harness.hpp"

using namespace ddp;
using namespace ddp::test;

namespace {

using Clock = std::chrono::steady_clock;

// Wraps a store; once armed, its Nth call from then on and every later call throw NetworkError
// (the way a TcpStoreClient fails once its connection broke).
class FlakyStore final : public Store {
 public:
  explicit FlakyStore(Store& base) : base_(base) {}
  void failFromCall(int64_t n) { failAt_ = calls_.load() + n; }

  void set(const std::string& k, const std::string& v) override { hit(); base_.set(k, v); }
  std::string get(const std::string& k) override { hit(); return base_.get(k); }
  int64_t add(const std::string& k, int64_t d) override { hit(); return base_.add(k, d); }
  std::string compareSet(const std::string& k, const std::string& e,
                         const std::string& d) override {
    hit();
    return base_.compareSet(k, e, d);
  }
  using Store::wait;
  void wait(const std::vector<std::string>& k, std::chrono::milliseconds t) override {
    hit();
    base_.wait(k, t);
  }
  bool check(const std::vector<std::string>& k) override { hit(); return base_.check(k); }
  bool deleteKey(const std::string& k) override { hit(); return base_.deleteKey(k); }
  int64_t numKeys() override { hit(); return base_.numKeys(); }
  std::vector<std::string> multiGet(const std::vector<std::string>& k) override {
    hit();
    return base_.multiGet(k);
  }
  void multiSet(const std::vector<std::string>& k, const std::vector<std::string>& v) override {
    hit();
    base_.multiSet(k, v);
  }
  void append(const std::string& k, const std::string& v) override { hit(); base_.append(k, v); }
  std::chrono::milliseconds timeout() const override { return base_.timeout(); }
  void setTimeout(std::chrono::milliseconds t) override { base_.setTimeout(t); }

 private:
  void hit() {
    if (++calls_ >= failAt_) throw NetworkError("injected failure: connection to the store lost");
  }
  Store& base_;
  std::atomic<int64_t> calls_{0};
  std::atomic<int64_t> failAt_{INT64_MAX};
};

RendezvousSettings livenessSettings(const std::string& runId, int minNodes, int maxNodes) {
  auto s = fastSettings(runId, minNodes, maxNodes);
  s.keepAliveInterval = 100ms;
  s.heartbeatTimeout = 1500ms;  // a starved thread on a loaded CI box must not look dead
  return s;
}

}  // namespace

TEST_CASE("a silent node (no leave) makes the survivors re-rendezvous without it (2:3)",
          "[rendezvous][liveness]") {
  InMemoryStore store;
  const auto settings = livenessSettings("lost", 2, 3);
  auto a = std::make_unique<Agent>(store, settings, node("k0"));
  auto b = std::make_unique<Agent>(store, settings, node("k1"));
  auto c = std::make_unique<Agent>(store, settings, node("k2"));
  const auto first = joinAll({a.get(), b.get(), c.get()});
  checkConsistent(first);
  REQUIRE(first[0].nodeCount == 3);
  a->watch();
  b->watch();
  c->watch();
  // Kill node rank 0 (the one watching everybody) or rank 2, without leave(): like SIGKILL.
  const int victim = GENERATE(0, 2);
  std::vector<std::unique_ptr<Agent>*> all{&a, &b, &c};
  std::vector<Agent*> survivors;
  for (size_t i = 0; i < all.size(); ++i) {
    if (first[i].nodeRank == victim) {
      all[i]->reset();
    } else {
      survivors.push_back(all[i]->get());
    }
  }
  const auto killedAt = Clock::now();
  for (Agent* s : survivors) {
    const auto event = s->events.waitFor(15s);
    REQUIRE(event);
    CHECK(event->kind == RendezvousEventKind::kPeerLost);
    CHECK(event->generation == 0);
    CHECK_THAT(event->detail, Catch::Contains("node rank " + std::to_string(victim)));
  }
  // Not before the heartbeat timeout (minus one keep-alive of slack), and promptly after it.
  const auto detected = Clock::now() - killedAt;
  CHECK(detected >= settings.heartbeatTimeout - 2 * settings.keepAliveInterval);
  CHECK(detected < 15s);
  const auto second = joinAll(survivors);
  checkConsistent(second);
  CHECK(second[0].generation == 1);
  CHECK(second[0].nodeCount == 2);
  CHECK(second[0].restartsUsed == 0);
}

TEST_CASE("fewer than min_nodes left after a loss: TimeoutError", "[rendezvous][liveness]") {
  InMemoryStore store;
  auto settings = livenessSettings("lost-min", 2, 2);
  settings.joinTimeout = 3s;
  Agent a(store, settings, node("p0"));
  auto b = std::make_unique<Agent>(store, settings, node("p1"));
  checkConsistent(joinAll({&a, b.get()}));
  a.watch();
  b.reset();
  const auto event = a.events.waitFor(15s);
  REQUIRE(event);
  CHECK(event->kind == RendezvousEventKind::kPeerLost);
  CHECK_THROWS_WITH(a.rdzv->next(), Catch::Contains("1 node(s) joined") &&
                                        Catch::Contains("min_nodes=2"));
}

TEST_CASE("the restart budget is shared by the job", "[rendezvous]") {
  InMemoryStore store;
  auto settings = fastSettings("budget", 3, 3);
  settings.maxRestarts = 1;
  Agent a(store, settings, node("b0"));
  Agent b(store, settings, node("b1"));
  Agent c(store, settings, node("b2"));
  checkConsistent(joinAll({&a, &b, &c}));
  for (Agent* x : {&a, &b, &c}) x->watch();

  CHECK(b.rdzv->failures().reportFailure(R"({"node":"b1","gen":0})").kind ==
        RendezvousEventKind::kRestartRequested);
  for (Agent* x : {&a, &c}) {
    const auto event = x->events.waitFor(10s);
    REQUIRE(event);
    CHECK(event->kind == RendezvousEventKind::kRestartRequested);
    CHECK_THAT(event->detail, Catch::Contains("b1") && Catch::Contains("restart 1 of 1"));
  }
  // A second failure in the same generation (a consequence of the first) spends nothing.
  CHECK(c.rdzv->failures().reportFailure(R"({"node":"b2","gen":0})").kind ==
        RendezvousEventKind::kRestartRequested);
  const auto second = joinAll({&a, &b, &c});
  checkConsistent(second);
  CHECK(second[0].generation == 1);
  CHECK(second[0].restartsUsed == 1);

  for (Agent* x : {&a, &b, &c}) x->events.clear();
  CHECK(a.rdzv->failures().reportFailure(R"({"node":"b0","gen":1})").kind ==
        RendezvousEventKind::kJobFailed);
  for (Agent* x : {&b, &c}) {
    const auto event = x->events.waitFor(10s);
    REQUIRE(event);
    CHECK(event->kind == RendezvousEventKind::kJobFailed);
    CHECK_THAT(event->detail, Catch::Contains("max_restarts=1"));
  }
  const auto records = a.rdzv->failures().failureRecords();
  CHECK(records.size() == 3);
  CHECK(records == b.rdzv->failures().failureRecords());
  CHECK(records == c.rdzv->failures().failureRecords());
  const JobEnded end = ended(b.rdzv->next());
  CHECK(end.result == JobResult::kFailed);
  CHECK(end.standing == NodeStanding::kMember);
  CHECK_THAT(end.reason, Catch::Contains("max_restarts=1"));
  CHECK(roundEnded(c.rdzv->exitBarrier(1s)).kind == RendezvousEventKind::kJobFailed);
}

TEST_CASE("a verdict ends the job instead of a restart, the same way on every node",
          "[rendezvous][verdict]") {
  InMemoryStore store;
  auto settings = fastSettings("verdict", 3, 3);
  settings.maxRestarts = 5;  // budget left: the verdict, not the budget, ends the job
  Agent a(store, settings, node("v0"));
  Agent b(store, settings, node("v1"));
  Agent c(store, settings, node("v2"));
  checkConsistent(joinAll({&a, &b, &c}));
  for (Agent* x : {&a, &b, &c}) x->watch();
  // Generation 0: a plain report spends a restart; a verdict reported second changes nothing.
  CHECK(b.rdzv->failures().reportFailure(R"({"node":"v1","gen":0})").kind ==
        RendezvousEventKind::kRestartRequested);
  const RendezvousEvent late =
      c.rdzv->failures().reportVerdict(R"({"node":"v2","gen":0})", "too late");
  CHECK(late.kind == RendezvousEventKind::kRestartRequested);
  CHECK_FALSE(late.verdict);
  checkConsistent(joinAll({&a, &b, &c}));
  for (Agent* x : {&a, &b, &c}) x->events.clear();
  // Generation 1: the first report carries a verdict.
  const std::string line = "the same failure in 2 generations in a row: rank 1 exit 1";
  const RendezvousEvent mine = b.rdzv->failures().reportVerdict(R"({"node":"v1","gen":1})", line);
  CHECK(mine.kind == RendezvousEventKind::kJobFailed);
  CHECK(mine.verdict);
  CHECK(mine.detail == line);
  for (Agent* x : {&a, &c}) {
    const auto event = x->events.waitFor(10s);
    REQUIRE(event);
    CHECK(event->kind == RendezvousEventKind::kJobFailed);
    CHECK(event->verdict);
    CHECK(event->detail == line);
  }
  // A later report of the generation learns the same; nothing was spent on the verdict.
  const RendezvousEvent after = c.rdzv->failures().reportFailure(R"({"node":"v2","gen":1})");
  CHECK(after.kind == RendezvousEventKind::kJobFailed);
  CHECK(after.verdict);
  const JobEnded end = ended(a.rdzv->next());
  CHECK(end.result == JobResult::kFailed);
  CHECK(end.verdict);
  CHECK(end.reason == line);
  CHECK(a.rdzv->failures().failureRecords().size() == 4);
}

TEST_CASE("a verdict whose report finds the budget spent: the budget ends the job, not the "
          "verdict", "[rendezvous][verdict]") {
  InMemoryStore store;
  auto settings = fastSettings("verdict-budget", 2, 2);
  settings.maxRestarts = 1;
  Agent a(store, settings, node("w0"));
  Agent b(store, settings, node("w1"));
  checkConsistent(joinAll({&a, &b}));
  for (Agent* x : {&a, &b}) x->watch();
  CHECK(b.rdzv->failures().reportFailure(R"({"node":"w1","gen":0})").kind ==
        RendezvousEventKind::kRestartRequested);
  checkConsistent(joinAll({&a, &b}));
  for (Agent* x : {&a, &b}) x->events.clear();
  // Generation 1: the verdict's report is the one that finds the last restart spent.
  const RendezvousEvent mine =
      b.rdzv->failures().reportVerdict(R"({"node":"w1","gen":1})", "the same");
  CHECK(mine.kind == RendezvousEventKind::kJobFailed);
  CHECK_FALSE(mine.verdict);
  CHECK_THAT(mine.detail, Catch::Contains("max_restarts=1"));
  const auto event = a.events.waitFor(10s);
  REQUIRE(event);
  CHECK(event->kind == RendezvousEventKind::kJobFailed);
  CHECK_FALSE(event->verdict);
  const JobEnded end = ended(a.rdzv->next());
  CHECK(end.result == JobResult::kFailed);
  CHECK_FALSE(end.verdict);
  CHECK_THAT(end.reason, Catch::Contains("is spent"));
}

TEST_CASE("exit barrier: all succeed, or a failure elsewhere turns it into a restart",
          "[rendezvous]") {
  InMemoryStore store;
  auto settings = fastSettings("barrier", 3, 3);
  settings.maxRestarts = 3;
  Agent a(store, settings, node("e0"));
  Agent b(store, settings, node("e1"));
  Agent c(store, settings, node("e2"));
  checkConsistent(joinAll({&a, &b, &c}));
  auto fa = std::async(std::launch::async, [&] { return a.rdzv->exitBarrier(10s); });
  auto fb = std::async(std::launch::async, [&] { return b.rdzv->exitBarrier(10s); });
  CHECK(fa.wait_for(300ms) == std::future_status::timeout);  // waits for c
  CHECK(c.rdzv->failures().reportFailure("{}").kind == RendezvousEventKind::kRestartRequested);
  CHECK(roundEnded(fa.get()).kind == RendezvousEventKind::kRestartRequested);
  CHECK(roundEnded(fb.get()).kind == RendezvousEventKind::kRestartRequested);

  checkConsistent(joinAll({&a, &b, &c}));
  b.watch();
  auto f0 = std::async(std::launch::async, [&] { return a.rdzv->exitBarrier(10s); });
  auto f1 = std::async(std::launch::async, [&] { return b.rdzv->exitBarrier(10s); });
  auto f2 = std::async(std::launch::async, [&] { return c.rdzv->exitBarrier(10s); });
  CHECK(std::holds_alternative<AllSucceeded>(f0.get()));
  CHECK(std::holds_alternative<AllSucceeded>(f1.get()));
  CHECK(std::holds_alternative<AllSucceeded>(f2.get()));
  a.rdzv->leave();  // leaving after success disturbs nobody
  c.rdzv->leave();
  CHECK(b.events.waitFor(500ms) == std::nullopt);

  Agent lone(store, fastSettings("barrier-timeout", 2, 2), node("x0"));
  Agent other(store, fastSettings("barrier-timeout", 2, 2), node("x1"));
  joinAll({&lone, &other});
  CHECK_THROWS_WITH(lone.rdzv->exitBarrier(200ms), Catch::Contains("1 of 2 nodes done"));
}

TEST_CASE("store faults: a clear error from next(), kStoreLost while running", "[rendezvous]") {
  InMemoryStore backing;
  SECTION("next() fails with the store's NetworkError") {
    FlakyStore flaky(backing);
    Agent a(flaky, fastSettings("flaky-join", 1, 1), node("f0"));
    flaky.failFromCall(3);
    CHECK_THROWS_AS(a.rdzv->next(), NetworkError);
  }
  SECTION("a store that stops answering while running is reported after heartbeat_timeout") {
    FlakyStore flaky(backing);
    auto settings = livenessSettings("flaky-run", 1, 1);
    Agent a(flaky, settings, node("f1"));
    joined(a.rdzv->next());
    a.watch();
    const auto brokenAt = Clock::now();
    flaky.failFromCall(1);
    const auto event = a.events.waitFor(15s);
    REQUIRE(event);
    CHECK(event->kind == RendezvousEventKind::kStoreLost);
    CHECK_THAT(event->detail, Catch::Contains("injected failure"));
    CHECK(Clock::now() - brokenAt >= settings.heartbeatTimeout - settings.keepAliveInterval);
    CHECK(a.events.waitFor(300ms)->kind == RendezvousEventKind::kStoreLost);
    CHECK(a.events.count() == 1);  // once per generation
  }
}
