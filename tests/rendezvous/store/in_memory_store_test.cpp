// InMemoryStore: the Store contract, plus thread-safety under concurrent callers.
#include <catch2/catch.hpp>

#include <atomic>
#include <future>
#include <latch>
#include <thread>
#include <vector>

#include "rendezvous/base/error.hpp"
#include "rendezvous/store/in_memory_store.hpp"
#include "tests/rendezvous/store_contract.hpp"

namespace ddp {
namespace {

using namespace std::chrono_literals;

TEST_CASE("InMemoryStore honours the Store contract", "[in_memory_store]") {
  InMemoryStore store;
  test::checkSingleClientOps(store, "ops/");
  test::checkWaitTimeouts(store, "timeouts/");
  test::checkWaitWakeups(store, store, "wakeups/");
}

TEST_CASE("InMemoryStore add on a non-numeric value throws and keeps the value",
          "[in_memory_store]") {
  InMemoryStore store;
  store.set("text", "abc");
  CHECK_THROWS_AS(store.add("text", 1), Error);
  CHECK(store.get("text") == "abc");
  store.set("prefix", "12abc");  // like std::stoll on the server: a numeric prefix counts
  CHECK(store.add("prefix", 1) == 13);
}

TEST_CASE("InMemoryStore compareSet creating a key wakes waiters; delete does not",
          "[in_memory_store]") {
  InMemoryStore store;
  auto waiter = std::async(std::launch::async, [&] { store.wait({"k"}, 30s); });
  CHECK(store.compareSet("k", "", "v") == "v");
  REQUIRE(waiter.wait_for(30s) == std::future_status::ready);
  waiter.get();

  CHECK(store.deleteKey("k"));
  auto second = std::async(std::launch::async, [&] { return store.get("k"); });
  store.deleteKey("k");  // deleting a missing key must not release the get
  CHECK(second.wait_for(100ms) == std::future_status::timeout);
  store.set("k", "again");
  REQUIRE(second.wait_for(30s) == std::future_status::ready);
  CHECK(second.get() == "again");
}

TEST_CASE("InMemoryStore is linearizable under concurrent add, compareSet and append",
          "[in_memory_store]") {
  InMemoryStore store;
  constexpr int kThreads = 8;
  constexpr int kOps = 2000;
  std::latch start(kThreads);
  std::vector<std::thread> threads;
  for (int t = 0; t < kThreads; ++t) {
    threads.emplace_back([&, t] {
      start.arrive_and_wait();
      for (int i = 0; i < kOps; ++i) {
        store.add("counter", 1);
        // A compare-and-set increment loop: every success is exactly one increment. Values carry
        // the writer's id so "the value after" equals ours only if our swap happened.
        const std::string tag = ":" + std::to_string(t) + "/" + std::to_string(i);
        for (;;) {
          const std::string seen = store.compareSet("cas", "", "0");
          const std::string next = std::to_string(std::stoll(seen) + 1) + tag;
          if (store.compareSet("cas", seen, next) == next) break;
        }
        store.append("log/" + std::to_string(t), "x");
      }
    });
  }
  for (auto& thread : threads) thread.join();
  CHECK(store.get("counter") == std::to_string(kThreads * kOps));
  CHECK(std::stoll(store.get("cas")) == kThreads * kOps);
  for (int t = 0; t < kThreads; ++t) {
    CHECK(store.get("log/" + std::to_string(t)).size() == static_cast<std::size_t>(kOps));
  }
  CHECK(store.numKeys() == 2 + kThreads);
}

TEST_CASE("InMemoryStore releases many concurrent waiters with one set", "[in_memory_store]") {
  InMemoryStore store;
  constexpr int kWaiters = 16;
  std::vector<std::future<std::string>> waiters;
  for (int i = 0; i < kWaiters; ++i) {
    waiters.push_back(std::async(std::launch::async, [&] { return store.get("go"); }));
  }
  store.set("go", "now");
  for (auto& waiter : waiters) {
    REQUIRE(waiter.wait_for(30s) == std::future_status::ready);
    CHECK(waiter.get() == "now");
  }
}

TEST_CASE("InMemoryStore handles share the data, not their timeouts or interrupts",
          "[in_memory_store]") {
  auto first = std::make_unique<InMemoryStore>(30s);
  auto second = first->newHandle();
  second->setTimeout(100ms);
  CHECK(first->timeout() == 30s);
  first->set("k", "v");
  CHECK(second->get("k") == "v");
  CHECK_THROWS_AS(second->get("missing"), TimeoutError);  // its own 100 ms, not 30 s

  second->interruptWait();  // latched for `second` only
  auto waiting = std::async(std::launch::async, [&] { first->wait({"later"}, 30s); });
  CHECK_THROWS_WITH(second->wait({"never"}, 30s), Catch::Contains("interrupted"));
  CHECK_THROWS_WITH(second->wait({"never"}, 50ms), Catch::Contains("timed out"));
  first.reset();  // the data lives on in `second`...
  second->set("later", "x");
  REQUIRE(waiting.wait_for(30s) == std::future_status::ready);  // ...and wakes the other handle
}

TEST_CASE("InMemoryStore interruptWait() ends a wait in progress", "[in_memory_store]") {
  InMemoryStore store;
  auto waiting = std::async(std::launch::async, [&] {
    try {
      store.wait({"never"}, 60s);
      return std::string("returned");
    } catch (const TimeoutError& e) {
      return std::string(e.what());
    }
  });
  store.interruptWait();
  REQUIRE(waiting.wait_for(20s) == std::future_status::ready);
  CHECK_THAT(waiting.get(), Catch::Contains("never"));
  store.set("k", "v");
  CHECK(store.get("k") == "v");
}

}  // namespace
}  // namespace ddp
