// FlakyStore (tests/fakes): fails exactly the calls it is told to, forwards the rest.
#include <catch2/catch.hpp>

#include "rendezvous/base/error.hpp"
#include "rendezvous/store/in_memory_store.hpp"
#include "tests/fakes/flaky_store.hpp"

namespace ddp {
namespace {

TEST_CASE("FlakyStore fails the Nth call and forwards the others", "[flaky_store]") {
  InMemoryStore base;
  test::FlakyStore flaky(base);
  flaky.failOn(2);
  flaky.set("a", "1");                                   // call 1
  CHECK_THROWS_AS(flaky.set("b", "2"), NetworkError);    // call 2: never reaches the base
  CHECK_FALSE(base.check({"b"}));
  CHECK(flaky.get("a") == "1");                          // call 3
  CHECK(flaky.calls() == 3);
  CHECK(flaky.failures() == 1);
}

TEST_CASE("FlakyStore failFrom makes the store go away for good", "[flaky_store]") {
  InMemoryStore base;
  test::FlakyStore flaky(base);
  flaky.failFrom(3);
  CHECK(flaky.add("n", 1) == 1);
  CHECK(flaky.add("n", 1) == 2);
  for (int i = 0; i < 3; ++i) CHECK_THROWS_AS(flaky.add("n", 1), NetworkError);
  CHECK(base.get("n") == "2");
  CHECK(flaky.failures() == 3);
}

TEST_CASE("FlakyStore throws the chosen error and names the call", "[flaky_store]") {
  InMemoryStore base;
  test::FlakyStore flaky(base);
  flaky.failOn(1);
  flaky.failWith([](const std::string& call) { throw TimeoutError(call + " timed out"); });
  try {
    flaky.wait({"k"});
    FAIL("the injected failure did not happen");
  } catch (const TimeoutError& e) {
    CHECK_THAT(e.what(), Catch::Contains("#1") && Catch::Contains("wait 'k'"));
  }
}

}  // namespace
}  // namespace ddp
