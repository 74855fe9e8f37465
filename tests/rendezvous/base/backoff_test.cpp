// Backoff: exponential growth with a cap, jitter within its bounds, never sleeping past a deadline.
#include <catch2/catch.hpp>

#include "rendezvous/base/backoff.hpp"

namespace ddp {
namespace {

using namespace std::chrono_literals;
using Clock = std::chrono::steady_clock;

TEST_CASE("Backoff grows exponentially up to its cap", "[backoff]") {
  Backoff backoff({.initial = 10ms, .max = 100ms, .multiplier = 2.0, .jitter = 0.0});
  CHECK(backoff.nextDelay() == 10ms);
  CHECK(backoff.nextDelay() == 20ms);
  CHECK(backoff.nextDelay() == 40ms);
  CHECK(backoff.nextDelay() == 80ms);
  CHECK(backoff.nextDelay() == 100ms);
  CHECK(backoff.nextDelay() == 100ms);
  backoff.reset();
  CHECK(backoff.nextDelay() == 10ms);
}

TEST_CASE("Backoff jitter stays within its fraction", "[backoff]") {
  Backoff backoff({.initial = 1000ms, .max = 1000ms, .multiplier = 2.0, .jitter = 0.25});
  bool varied = false;
  const auto first = backoff.nextDelay();
  for (int i = 0; i < 200; ++i) {
    const auto delay = backoff.nextDelay();
    CHECK(delay >= 750ms);
    CHECK(delay <= 1250ms);
    varied = varied || delay != first;
  }
  CHECK(varied);
}

TEST_CASE("Backoff never sleeps past the deadline", "[backoff]") {
  Backoff backoff({.initial = 10s, .max = 10s, .multiplier = 1.0, .jitter = 0.0});
  CHECK_FALSE(backoff.sleepBefore(Clock::now() - 1ms));
  const auto start = Clock::now();
  CHECK(backoff.sleepBefore(start + 50ms));
  const auto slept = Clock::now() - start;
  CHECK(slept >= 50ms);
  CHECK(slept < 5s);  // far below the 10 s delay
}

}  // namespace
}  // namespace ddp
