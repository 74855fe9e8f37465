// The heartbeat thread (RoundMonitor) on its own store connection: a blocked call of the agent
// does not delay heartbeats, a hung store is reported after heartbeat_timeout (not the store's
// read timeout), a broken connection is replaced, a round's end is seen at once, and ON_CLOSE is
// armed, applied when the agent vanishes and cleared when it leaves. The faults come from
// ControlledStore (tests/fakes/) wrapping InMemoryStore handles.
#include <catch2/catch.hpp>

#include <condition_variable>
#include <future>
#include <mutex>
#include <thread>
#include <variant>

#include "rendezvous/algorithm/detail/rendezvous_assign.hpp"
#include "rendezvous/store/in_memory_store.hpp"
#include "tests/rendezvous/rendezvous_harness.hpp"
#include "tests/fakes/controlled_store.hpp"

using namespace ddp;
using namespace ddp::test;

namespace {

using Clock = std::chrono::steady_clock;

// Connections handed out by a connector: each a ControlledStore over a new handle of `backing`.
class Connections {
 public:
  explicit Connections(InMemoryStore& backing, std::shared_ptr<Journal> journal = nullptr)
      : backing_(backing), journal_(std::move(journal)) {}

  StoreConnector connector() {
    return [this](std::chrono::milliseconds) -> std::unique_ptr<Store> {
      auto handle = backing_.newHandle();
      handle->setTimeout(std::chrono::seconds(300));  // a store's read timeout: never reached
      auto conn = std::make_unique<ControlledStore>(std::move(handle));
      if (journal_) conn->withOnClose(journal_);
      std::lock_guard<std::mutex> lock(mutex_);
      if (hangNew_) conn->hang();
      opened_.push_back(conn.get());
      changed_.notify_all();
      return conn;
    };
  }
  // Waits until `n` connections were opened; the newest one (it lives while the monitor uses it).
  ControlledStore* waitOpened(std::size_t n) {
    std::unique_lock<std::mutex> lock(mutex_);
    if (!changed_.wait_for(lock, 20s, [&] { return opened_.size() >= n; })) return nullptr;
    return opened_.back();
  }
  // Every connection from now on gets no answer (the newest open one included).
  void hangAll() {
    std::lock_guard<std::mutex> lock(mutex_);
    hangNew_ = true;
    if (!opened_.empty()) opened_.back()->hang();
  }
  std::size_t opened() {
    std::lock_guard<std::mutex> lock(mutex_);
    return opened_.size();
  }

 private:
  InMemoryStore& backing_;
  std::shared_ptr<Journal> journal_;
  std::mutex mutex_;
  std::condition_variable changed_;
  std::vector<ControlledStore*> opened_;  // guarded by mutex_ (only the newest may still live)
  bool hangNew_ = false;
};

// Polls `condition` until it holds (true) or 20 s passed (false).
template <class F>
bool eventually(F condition) {
  const auto deadline = Clock::now() + 20s;
  while (!condition()) {
    if (Clock::now() > deadline) return false;
    std::this_thread::sleep_for(20ms);
  }
  return true;
}

RendezvousSettings liveness(const std::string& runId, std::chrono::milliseconds heartbeatTimeout) {
  auto s = fastSettings(runId, 2, 2);
  s.keepAliveInterval = 100ms;
  s.heartbeatTimeout = heartbeatTimeout;
  return s;
}

}  // namespace

TEST_CASE("a blocked call of the agent does not delay its heartbeats", "[rendezvous][liveness]") {
  InMemoryStore backing;
  ControlledStore agentStore(backing);  // one connection, one call at a time: a TcpStoreClient
  agentStore.serialise();
  Connections forA(backing), forB(backing);
  const auto settings = liveness("blocked-call", 2500ms);
  auto blockFor = [&](std::chrono::milliseconds d) {
    return std::async(std::launch::async, [&agentStore, d] {
      CHECK_THROWS_AS(agentStore.wait({"never"}, d), TimeoutError);
    });
  };
  SECTION("own connection: nothing is lost") {
    Agent a(agentStore, settings, node("a"), forA.connector());
    Agent b(backing, settings, node("b"), forB.connector());
    joinAll({&a, &b});
    b.watch();
    auto blocked = blockFor(6s);
    CHECK(b.events.waitFor(5s) == std::nullopt);
    blocked.get();
  }
  SECTION("shared connection (the old arrangement): the blocked agent looks lost") {
    Agent a(agentStore, settings, node("a"));
    Agent b(backing, settings, node("b"), forB.connector());
    joinAll({&a, &b});
    b.watch();
    auto blocked = blockFor(6s);
    const auto event = b.events.waitFor(20s);
    blocked.get();
    REQUIRE(event);
    CHECK(event->kind == RendezvousEventKind::kPeerLost);
    CHECK_THAT(event->detail, Catch::Contains("sent no heartbeat"));
  }
}

TEST_CASE("a store that stops answering is lost after heartbeat_timeout, not its read timeout",
          "[rendezvous][liveness]") {
  InMemoryStore backing;
  Connections conns(backing);
  auto settings = liveness("hung-store", 1000ms);
  settings.minNodes = settings.maxNodes = 1;
  Agent a(backing, settings, node("h"), conns.connector());
  a.rdzv->next();
  a.watch();
  REQUIRE(conns.waitOpened(1));
  const auto hungAt = Clock::now();
  conns.hangAll();
  const auto event = a.events.waitFor(20s);  // the connections' read timeout is 300 s
  REQUIRE(event);
  CHECK(event->kind == RendezvousEventKind::kStoreLost);
  CHECK_THAT(event->detail, Catch::Contains("has not answered for") &&
                                Catch::Contains("heartbeat_timeout 1000 ms"));
  // Not before heartbeat_timeout after its last answer (at most one interval before the hang).
  CHECK(Clock::now() - hungAt >= settings.heartbeatTimeout - settings.keepAliveInterval);
  CHECK(a.events.count() == 1);
}

TEST_CASE("a broken heartbeat connection is replaced without any event", "[rendezvous][liveness]") {
  InMemoryStore backing;
  Connections forA(backing), forB(backing);
  const auto settings = liveness("broken-link", 1500ms);
  Agent a(backing, settings, node("a"), forA.connector());
  Agent b(backing, settings, node("b"), forB.connector());
  const auto rounds = joinAll({&a, &b});
  a.watch();
  b.watch();
  for (std::size_t n = 1; n <= 3; ++n) {
    ControlledStore* conn = forA.waitOpened(n);
    REQUIRE(conn);
    conn->breakNow();
  }
  REQUIRE(forA.waitOpened(4));
  // a heartbeats again on its fourth connection: b sees its counter move.
  const std::string hb = "rdzv/broken-link/0/r/0/hb/" + std::to_string(rounds[0].nodeRank);
  const int64_t before = backing.add(hb, 0);
  CHECK(eventually([&] { return backing.add(hb, 0) >= before + 3; }));
  CHECK(a.events.count() == 0);
  CHECK(b.events.count() == 0);
}

TEST_CASE("a failed heartbeat is tried again at once, not a keep-alive interval later",
          "[rendezvous][liveness]") {
  InMemoryStore backing;
  Connections forA(backing), forB(backing);
  auto settings = fastSettings("prompt-retry", 2, 2);
  settings.keepAliveInterval = 30s;  // the next regular tick is far away
  settings.heartbeatTimeout = 300s;
  Agent a(backing, settings, node("a"), forA.connector());
  Agent b(backing, settings, node("b"), forB.connector());
  const auto rounds = joinAll({&a, &b});
  a.watch();
  ControlledStore* conn = forA.waitOpened(1);
  REQUIRE(conn);
  const std::string hb = "rdzv/prompt-retry/0/r/0/hb/" + std::to_string(rounds[0].nodeRank);
  const int64_t before = backing.add(hb, 0);
  conn->breakNow();
  a.watch();  // installing the callback again makes the monitor tick now: the tick fails
  // The failed beat is retried on a new connection within milliseconds (before: 30 s later).
  CHECK(eventually([&] { return backing.add(hb, 0) > before; }));
  CHECK(forA.opened() >= 2);
  CHECK(a.events.count() == 0);
}

TEST_CASE("a member that died before its first heartbeat ends the round at once",
          "[rendezvous][liveness]") {
  // b joined, then died before its heartbeat connection armed ON_CLOSE: the ON_CLOSE of its join
  // marked its join record "x". a sees that on its next look, long before heartbeat_timeout.
  InMemoryStore backing;
  Connections forA(backing), forB(backing);
  forB.hangAll();  // b's heartbeat thread never gets an answer: its counter stays at "0"
  const auto settings = liveness("died-joining-member", 60s);
  Agent a(backing, settings, node("a"), forA.connector());
  Agent b(backing, settings, node("b"), forB.connector());
  const auto rounds = joinAll({&a, &b});
  a.watch();
  const int bRank = rounds[1].nodeRank;
  int64_t bSlot = 0;
  for (int64_t slot = 1; slot <= 2; ++slot) {
    const std::string record = backing.get("rdzv/died-joining-member/0/r/0/node/" +
                                           std::to_string(slot));
    if (detail::decodeJoinRecord(record).node.host == "b") bSlot = slot;
  }
  REQUIRE(bSlot > 0);
  backing.set("rdzv/died-joining-member/0/r/0/node/" + std::to_string(bSlot), "x");
  const auto event = a.events.waitFor(10s);
  REQUIRE(event);
  CHECK(event->kind == RendezvousEventKind::kPeerLost);
  CHECK(event->lostRank == bRank);
  CHECK_THAT(event->detail, Catch::Contains("died before its first heartbeat"));
}

TEST_CASE("a join arms ON_CLOSE for its record on the agent's connection",
          "[rendezvous][liveness]") {
  InMemoryStore backing;
  auto journal = std::make_shared<Journal>();
  ControlledStore aStore(backing);
  aStore.withOnClose(journal);
  const auto settings = fastSettings("join-on-close", 1, 1);
  Agent a(aStore, settings, node("a"));
  REQUIRE(joined(a.rdzv->next()).generation == 0);
  CHECK(journal->contains("arm rdzv/join-on-close/0/r/0/node/1"));
}

TEST_CASE("a round's end is seen at once, not at the next heartbeat tick",
          "[rendezvous][liveness]") {
  InMemoryStore backing;
  Connections forA(backing), forB(backing);
  auto settings = fastSettings("prompt-end", 2, 2);
  settings.keepAliveInterval = std::chrono::hours(1);  // no tick within this test
  settings.heartbeatTimeout = std::chrono::hours(3);
  settings.maxRestarts = 1;
  Agent a(backing, settings, node("a"), forA.connector());
  Agent b(backing, settings, node("b"), forB.connector());
  joinAll({&a, &b});
  a.watch();
  REQUIRE(forA.waitOpened(1));
  CHECK(b.rdzv->failures().reportFailure("{}").kind == RendezvousEventKind::kRestartRequested);
  const auto event = a.events.waitFor(10s);
  REQUIRE(event);
  CHECK(event->kind == RendezvousEventKind::kRestartRequested);
  // Leaving the scope stops both monitors at once, though each waits out a one-hour interval.
}

TEST_CASE("ON_CLOSE: armed on entering a round, applied when the agent vanishes, cleared on leave",
          "[rendezvous][liveness]") {
  InMemoryStore backing;
  auto journal = std::make_shared<Journal>();
  Connections forA(backing, journal), forB(backing);
  const auto settings = liveness("on-close", 60s);  // the heartbeat cannot be what ends a round
  auto a = std::make_unique<Agent>(backing, settings, node("a"), forA.connector());
  Agent b(backing, settings, node("b"), forB.connector());
  joinAll({a.get(), &b});
  b.watch();
  const std::string end0 = "rdzv/on-close/0/r/0/end";
  REQUIRE(journal->waitFor("arm " + end0, 20s));
  REQUIRE(journal->waitFor("arm rdzv/on-close/0/round", 20s));

  SECTION("destroyed without leave(): the round ends for the others at once") {
    a.reset();
    CHECK(journal->contains("applied " + end0));
    const auto event = b.events.waitFor(10s);
    REQUIRE(event);
    CHECK(event->kind == RendezvousEventKind::kPeerLost);
    CHECK_THAT(event->detail, Catch::Contains("lost its connection to the rendezvous store"));
    CHECK(backing.get("rdzv/on-close/0/round") == "1");
  }
  SECTION("finished and left: cleared before the connection closes") {
    auto barrier = std::async(std::launch::async, [&] { return b.rdzv->exitBarrier(10s); });
    CHECK(std::holds_alternative<AllSucceeded>(a->rdzv->exitBarrier(10s)));
    CHECK(std::holds_alternative<AllSucceeded>(barrier.get()));
    a->rdzv->leave();
    a.reset();
    CHECK(journal->contains("clear 2"));
    CHECK_FALSE(journal->contains("applied " + end0));
    CHECK_FALSE(backing.check({end0}));
  }
  SECTION("the next round: the old registration is cleared before the new one is armed") {
    auto rejoinB = std::async(std::launch::async, [&] { return b.rdzv->next(); });
    a->watch();
    REQUIRE(a->events.waitFor(10s));
    a->rdzv->next();
    rejoinB.get();
    REQUIRE(journal->waitFor("arm rdzv/on-close/0/r/1/end", 20s));
    const auto entries = journal->entries();
    const auto clear = std::find(entries.begin(), entries.end(), "clear 2");
    const auto arm1 = std::find(entries.begin(), entries.end(), "arm rdzv/on-close/0/r/1/end");
    CHECK(clear < arm1);
    a->rdzv->leave();
  }
}
