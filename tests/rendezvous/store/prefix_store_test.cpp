// PrefixStore: the Store contract through a prefix, and where keys land in the base store.
#include <catch2/catch.hpp>

#include <future>
#include <thread>
#include <vector>

#include "rendezvous/store/in_memory_store.hpp"
#include "rendezvous/store/prefix_store.hpp"
#include "tests/rendezvous/store_contract.hpp"

namespace ddp {
namespace {

using namespace std::chrono_literals;

TEST_CASE("PrefixStore honours the Store contract", "[prefix_store]") {
  InMemoryStore base;
  PrefixStore store("job", base);
  test::checkSingleClientOps(store, "ops/");
  test::checkWaitTimeouts(store, "timeouts/");
  PrefixStore other("job", base);
  test::checkWaitWakeups(store, other, "wakeups/");
}

TEST_CASE("PrefixStore puts every key under prefix/ in the base store", "[prefix_store]") {
  InMemoryStore base;
  PrefixStore store("rdzv/7", base);
  CHECK(store.prefix() == "rdzv/7");
  store.set("a", "1");
  CHECK(base.get("rdzv/7/a") == "1");
  CHECK(store.add("n", 2) == 2);
  CHECK(base.get("rdzv/7/n") == "2");
  store.multiSet({"m"}, {"v"});
  CHECK(base.check({"rdzv/7/m"}));
  store.append("log", "x");
  CHECK(base.get("rdzv/7/log") == "x");
  CHECK(store.compareSet("c", "", "d") == "d");
  CHECK(base.get("rdzv/7/c") == "d");
  CHECK_FALSE(base.check({"a"}));

  base.set("rdzv/7/b", "2");
  CHECK(store.get("b") == "2");
  CHECK(store.multiGet({"a", "b"}) == std::vector<std::string>{"1", "2"});
  CHECK(store.check({"a", "b"}));
  CHECK(store.deleteKey("b"));
  CHECK_FALSE(base.check({"rdzv/7/b"}));
  // numKeys counts the whole base store, as in c10d.
  base.set("elsewhere", "x");
  CHECK(store.numKeys() == base.numKeys());
}

TEST_CASE("PrefixStore namespaces do not collide and nest", "[prefix_store]") {
  InMemoryStore base;
  PrefixStore a("a", base);
  PrefixStore b("b", base);
  PrefixStore inner("x", a);
  a.set("k", "from a");
  b.set("k", "from b");
  inner.set("k", "from a/x");
  CHECK(a.get("k") == "from a");
  CHECK(b.get("k") == "from b");
  CHECK(base.get("a/x/k") == "from a/x");
  // An empty prefix gives torch's TCPStore key layout: "/" + key.
  PrefixStore torchLayout("", base);
  torchLayout.set("k", "v");
  CHECK(base.get("/k") == "v");
}

TEST_CASE("PrefixStore timeouts pass through to the base store", "[prefix_store]") {
  InMemoryStore base(5s);
  PrefixStore store("p", base);
  CHECK(store.timeout() == 5s);
  store.setTimeout(100ms);
  CHECK(base.timeout() == 100ms);
  try {
    store.get("missing");
    FAIL("get of a missing key returned");
  } catch (const TimeoutError& e) {
    CHECK_THAT(e.what(), Catch::Contains("p/missing"));
  }
}

TEST_CASE("PrefixStore is safe under concurrent callers", "[prefix_store]") {
  InMemoryStore base;
  constexpr int kThreads = 8;
  constexpr int kOps = 1000;
  std::vector<std::thread> threads;
  for (int t = 0; t < kThreads; ++t) {
    threads.emplace_back([&, t] {
      PrefixStore mine("t" + std::to_string(t), base);
      PrefixStore shared("shared", base);
      for (int i = 0; i < kOps; ++i) {
        mine.set("k" + std::to_string(i % 10), std::to_string(i));
        shared.add("count", 1);
      }
    });
  }
  for (auto& thread : threads) thread.join();
  PrefixStore shared("shared", base);
  CHECK(shared.get("count") == std::to_string(kThreads * kOps));
  CHECK(base.numKeys() == kThreads * 10 + 1);
  CHECK(base.get("t3/k9") == "999");
}

}  // namespace
}  // namespace ddp
