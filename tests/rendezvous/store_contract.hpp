// The Store contract (rendezvous/store/store.hpp, reference §3) as reusable Catch2 checks, run against
// every Store implementation: InMemoryStore, PrefixStore and TcpStoreClient over real servers.
//
// Each check uses keys under its own `ns` so several can share one store. Checks that need a
// second participant take a separate Store object (`other`): a TcpStoreClient serialises its
// callers, so a blocked wait on one client must be released through another.
#pragma once

#include <catch2/catch.hpp>

#include <chrono>
#include <future>
#include <stdexcept>
#include <string>
#include <vector>

#include "rendezvous/base/error.hpp"
#include "rendezvous/store/store.hpp"

namespace ddp::test {

using namespace std::chrono_literals;

// set/get/add/compareSet/check/deleteKey/numKeys/multiGet/multiSet/append on one store.
inline void checkSingleClientOps(Store& store, const std::string& ns) {
  const int64_t keysBefore = store.numKeys();
  store.set(ns + "a", "1");
  CHECK(store.get(ns + "a") == "1");
  store.set(ns + "a", "two");  // overwrite
  CHECK(store.get(ns + "a") == "two");
  const std::string binary("k\0\xff", 3);
  store.set(ns + binary, std::string("v\0v", 3));
  CHECK(store.get(ns + binary) == std::string("v\0v", 3));

  CHECK(store.add(ns + "cnt", 5) == 5);  // missing counts as 0
  CHECK(store.add(ns + "cnt", -7) == -2);
  CHECK(store.get(ns + "cnt") == "-2");  // decimal ASCII
  CHECK(store.add(ns + "zero", 0) == 0);
  CHECK(store.get(ns + "zero") == "0");

  CHECK(store.compareSet(ns + "cas", "", "first") == "first");       // create
  CHECK(store.compareSet(ns + "cas", "wrong", "x") == "first");      // mismatch: current
  CHECK(store.compareSet(ns + "cas", "first", "second") == "second");  // swap
  CHECK(store.compareSet(ns + "nocas", "zz", "v") == "zz");  // missing + expected: "lies"
  CHECK_FALSE(store.check({ns + "nocas"}));

  CHECK(store.check({ns + "a", ns + "cnt"}));
  CHECK_FALSE(store.check({ns + "a", ns + "missing"}));
  CHECK(store.check({}));

  CHECK(store.deleteKey(ns + "a"));
  CHECK_FALSE(store.deleteKey(ns + "a"));
  CHECK_FALSE(store.check({ns + "a"}));

  store.multiSet({ns + "m1", ns + "m2", ns + "m3"}, {"x", "", "zzz"});
  CHECK(store.multiGet({ns + "m3", ns + "m1", ns + "m2"}) ==
        std::vector<std::string>{"zzz", "x", ""});
  CHECK(store.multiGet({}).empty());
  CHECK_THROWS_AS(store.multiSet({ns + "m4"}, {}), std::invalid_argument);

  store.append(ns + "log", "ab");  // creates
  store.append(ns + "log", "cd");
  CHECK(store.get(ns + "log") == "abcd");

  // Keys now present: binary, cnt, zero, cas, m1, m2, m3, log.
  CHECK(store.numKeys() == keysBefore + 8);
}

// wait() and get() time out naming the key, and return once the keys exist.
inline void checkWaitTimeouts(Store& store, const std::string& ns) {
  try {
    store.wait({ns + "never"}, 200ms);
    FAIL("wait on a missing key returned");
  } catch (const TimeoutError& e) {
    CHECK_THAT(e.what(), Catch::Contains(ns + "never"));
  }
  const auto saved = store.timeout();
  store.setTimeout(200ms);
  CHECK(store.timeout() == 200ms);
  CHECK_THROWS_AS(store.get(ns + "never"), TimeoutError);
  CHECK_THROWS_AS(store.multiGet({ns + "never"}), TimeoutError);
  store.setTimeout(saved);
  store.set(ns + "here", "1");
  store.wait({ns + "here"}, 200ms);  // present: immediate
  store.wait({}, 200ms);
}

// A blocked wait/get on `waiter` is released by a set/add/append on `other`; multi-key waits need
// every key. `appendWakes` is false for torch 1.13's server, where a v1a client's composed append
// creates keys with COMPARE_SET, which that server does not wake waiters for.
inline void checkWaitWakeups(Store& waiter, Store& other, const std::string& ns,
                             bool appendWakes = true) {
  auto get = std::async(std::launch::async, [&] { return waiter.get(ns + "late"); });
  CHECK(get.wait_for(50ms) == std::future_status::timeout);
  other.set(ns + "late", "v");
  REQUIRE(get.wait_for(30s) == std::future_status::ready);
  CHECK(get.get() == "v");

  auto multi = std::async(std::launch::async, [&] {
    waiter.wait({ns + "k1", ns + "k2", ns + "k3"}, 30s);
  });
  other.add(ns + "k1", 1);
  if (appendWakes) {
    other.append(ns + "k2", "x");
  } else {
    other.set(ns + "k2", "x");
  }
  CHECK(multi.wait_for(100ms) == std::future_status::timeout);  // k3 still missing
  other.multiSet({ns + "k3"}, {"y"});
  REQUIRE(multi.wait_for(30s) == std::future_status::ready);
  multi.get();

  auto values = std::async(std::launch::async, [&] {
    return waiter.multiGet({ns + "g1", ns + "g2"});
  });
  other.set(ns + "g2", "2");
  other.set(ns + "g1", "1");
  REQUIRE(values.wait_for(30s) == std::future_status::ready);
  CHECK(values.get() == std::vector<std::string>{"1", "2"});
}

}  // namespace ddp::test
