// GlooCommunicator failure paths: a rank that never joins or never takes part in a collective makes
// the others fail with CommError within the budget — never a hang — and the error is sticky.
#include <catch2/catch.hpp>

#include <chrono>
#include <string>
#include <vector>

#include "rendezvous/base/error.hpp"
#include "tests/worker_runtime/rank_threads.hpp"
#include "worker_runtime/gloo_communicator.hpp"

using namespace std::chrono_literals;
using Clock = std::chrono::steady_clock;
using ddp::DataType;
using ddp::ReduceOp;

namespace {

constexpr auto kBudget = 1000ms;
// Upper bound for "failed promptly" on a loaded CI machine; far below the ctest timeout.
constexpr auto kPrompt = 15s;

struct Failure {
  std::string message;
  std::string stickyMessage;
  Clock::duration elapsed{};
  Clock::duration stickyElapsed{};
  bool threw = false;
};

// Ranks 0..size-2 run `op` while the last rank builds its communicator but never calls it; the
// last rank leaves (closing its pairs) only once the others have failed or kPrompt passed.
std::vector<Failure> oneRankAbsent(int size,
                                   const std::function<void(ddp::Communicator&)>& op) {
  std::vector<Failure> failures(size);
  ddp::test::Countdown done(size - 1);
  auto errors = ddp::test::runThreads(size, [&](int rank, ddp::Store& store) {
    // Connect with a generous budget (a loaded CI machine), then tighten it for the collective.
    ddp::GlooCommunicator comm(ddp::test::loopbackEnv(rank, size), store, ddp::test::glooOptions());
    comm.setTimeout(kBudget);
    if (rank == size - 1) {
      done.waitFor(kPrompt);
      return;
    }
    auto& f = failures[rank];
    auto start = Clock::now();
    try {
      op(comm);
    } catch (const ddp::CommError& e) {
      f.threw = true;
      f.message = e.what();
    }
    f.elapsed = Clock::now() - start;
    start = Clock::now();
    try {
      op(comm);
    } catch (const ddp::CommError& e) {
      f.stickyMessage = e.what();
    }
    f.stickyElapsed = Clock::now() - start;
    done.arrive();
  });
  REQUIRE(ddp::test::firstError(errors) == "");
  failures.pop_back();
  return failures;
}

void checkFailures(const std::vector<Failure>& failures, const std::string& op, int size) {
  for (std::size_t r = 0; r < failures.size(); ++r) {
    const auto& f = failures[r];
    INFO("rank " << r << ": " << f.message);
    REQUIRE(f.threw);
    CHECK_THAT(f.message, Catch::Contains(op) &&
                              Catch::Contains("rank " + std::to_string(r) + " of " +
                                              std::to_string(size)) &&
                              Catch::Contains("budget 1000 ms"));
    CHECK(f.elapsed >= kBudget * 9 / 10);
    CHECK(f.elapsed < kPrompt);
    // Sticky: the next call fails at once with the same error, without touching the network.
    CHECK(f.stickyMessage == f.message);
    CHECK(f.stickyElapsed < 100ms);
  }
}

}  // namespace

TEST_CASE("allreduce with a rank that never arrives fails within the budget", "[gloo][timeout]") {
  auto failures = oneRankAbsent(3, [](ddp::Communicator& comm) {
    std::vector<float> buf(1000, 1.0f);
    comm.allreduce(buf.data(), buf.size(), DataType::kFloat32, ReduceOp::kSum);
  });
  checkFailures(failures, "allreduce", 3);
}

TEST_CASE("reduceScatter with a rank that never arrives fails within the budget",
          "[gloo][timeout]") {
  auto failures = oneRankAbsent(3, [](ddp::Communicator& comm) {
    std::vector<uint16_t> send(300, 0);
    std::vector<uint16_t> recv(100, 0);
    comm.reduceScatter(send.data(), recv.data(), 100, DataType::kBFloat16, ReduceOp::kAvg);
  });
  checkFailures(failures, "reduce-scatter", 3);
}

TEST_CASE("a cached allreduce picks up a changed budget", "[gloo][timeout]") {
  // The first allreduce (all ranks present) caches its Gloo set-up with the 30 s budget; after
  // setTimeout the same buffer must fail within the new 1 s budget.
  std::vector<Failure> failures(1);
  ddp::test::Countdown done(1);
  auto errors = ddp::test::runThreads(2, [&](int rank, ddp::Store& store) {
    ddp::GlooCommunicator comm(ddp::test::loopbackEnv(rank, 2), store, ddp::test::glooOptions());
    std::vector<float> mine(64, 1.0f);
    comm.allreduce(mine.data(), mine.size(), DataType::kFloat32, ReduceOp::kSum);
    comm.setTimeout(kBudget);
    if (rank == 1) {
      done.waitFor(kPrompt);
      return;
    }
    auto start = Clock::now();
    try {
      comm.allreduce(mine.data(), mine.size(), DataType::kFloat32, ReduceOp::kSum);
    } catch (const ddp::CommError& e) {
      failures[0].threw = true;
      failures[0].message = e.what();
    }
    failures[0].elapsed = Clock::now() - start;
    done.arrive();
  });
  REQUIRE(ddp::test::firstError(errors) == "");
  REQUIRE(failures[0].threw);
  CHECK_THAT(failures[0].message, Catch::Contains("budget 1000 ms"));
  CHECK(failures[0].elapsed < kPrompt);
}

TEST_CASE("barrier with a rank that never arrives fails within the budget", "[gloo][timeout]") {
  auto failures = oneRankAbsent(2, [](ddp::Communicator& comm) { comm.barrier(); });
  checkFailures(failures, "barrier", 2);
}

TEST_CASE("building a communicator whose peer never joins fails within the budget",
          "[gloo][timeout]") {
  ddp::InMemoryStore store(60s);
  auto start = Clock::now();
  std::string message;
  try {
    ddp::GlooCommunicator comm(ddp::test::loopbackEnv(0, 2), store,
                               ddp::test::glooOptions(kBudget));
  } catch (const ddp::CommError& e) {
    message = e.what();
  }
  auto elapsed = Clock::now() - start;
  CHECK_THAT(message, Catch::Contains("rank 0 of 2 could not build the Gloo communicator") &&
                          Catch::Contains("budget 1000 ms"));
  CHECK(elapsed < kPrompt);
}
