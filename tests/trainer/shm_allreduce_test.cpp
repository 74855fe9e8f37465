// ShmAllreduce with ranks as threads over FakeCommunicator (the set-up collectives): sums equal
// the rank-order sum bit for bit on every rank, across chunk boundaries, without touching the
// inner communicator; ranks on different hosts keep the inner one; a rank that leaves or never
// arrives fails its peers with a sticky CommError instead of a hang.
#include <catch2/catch.hpp>

#include <future>
#include <stdexcept>
#include <string>
#include <random>
#include <thread>

#include "rendezvous/base/error.hpp"
#include "tests/fakes/fake_communicator.hpp"
#include "trainer/shm_allreduce.hpp"

using namespace ddp;

namespace {

std::vector<float> randomData(int rank, std::size_t count) {
  std::mt19937 rng(unsigned(rank) + 11);
  std::uniform_real_distribution<float> u(-1.0f, 1.0f);
  std::vector<float> v(count);
  for (auto& x : v) x = u(rng);
  return v;
}

// Catch2's assertions are not thread-safe: rank threads check with this and the main thread
// asserts that no rank threw.
void check(bool ok, const std::string& what) {
  if (!ok) throw std::runtime_error("check failed: " + what);
}

// Calls fn, which must throw CommError whose message contains `text`.
template <typename Fn>
void checkCommError(Fn fn, const std::string& text) {
  try {
    fn();
  } catch (const CommError& e) {
    check(std::string(e.what()).find(text) != std::string::npos, std::string("message: ") + e.what());
    return;
  }
  check(false, "no CommError (expected one containing '" + text + "')");
}

// Runs fn(rank, inner communicator) on `world` threads; returns each rank's exception (or null).
template <typename Fn>
std::vector<std::exception_ptr> onRanks(int world, Fn fn) {
  auto group = std::make_shared<test::FakeGroup>(world);
  std::vector<std::exception_ptr> errors(world);
  std::vector<std::thread> threads;
  for (int r = 0; r < world; ++r) {
    threads.emplace_back([&, r] {
      try {
        test::FakeCommunicator comm(group, r);
        fn(r, comm);
      } catch (...) {
        errors[r] = std::current_exception();
      }
    });
  }
  for (auto& t : threads) t.join();
  return errors;
}

}  // namespace

TEST_CASE("sums equal the rank-order sum on every rank, across chunks, without the inner communicator",
          "[shm]") {
  const int world = 3;
  const std::size_t count = 1037;  // 10 chunks of 100 and a partial one; not a multiple of 3 or 16
  std::vector<std::vector<float>> out(world);
  auto errors = onRanks(world, [&](int r, test::FakeCommunicator& comm) {
    ShmAllreduceOptions options;
    options.chunkFloats = 100;
    auto shm = ShmAllreduce::tryCreate(comm, options);
    check(shm != nullptr, "shared memory set up");
    const int setupCalls = comm.calls();
    out[r] = randomData(r, count);
    shm->allreduce(out[r].data(), count, DataType::kFloat32, ReduceOp::kSum);
    std::vector<float> avg = randomData(r, 7);
    shm->allreduce(avg.data(), avg.size(), DataType::kFloat32, ReduceOp::kAvg);
    check(avg[0] == ((randomData(0, 7)[0] + randomData(1, 7)[0]) + randomData(2, 7)[0]) / 3.0f, "avg");
    check(comm.calls() == setupCalls, "the inner communicator was not used");
  });
  for (auto& e : errors) REQUIRE_FALSE(e);
  auto a = randomData(0, count), b = randomData(1, count), c = randomData(2, count);
  for (std::size_t i = 0; i < count; ++i) {
    INFO("element " << i);
    REQUIRE(out[0][i] == (a[i] + b[i]) + c[i]);  // exact: rank order, once per element
  }
  REQUIRE(out[1] == out[0]);
  REQUIRE(out[2] == out[0]);
}

TEST_CASE("ranks on different hosts keep the inner communicator", "[shm]") {
  std::vector<int> created(2, -1);
  auto errors = onRanks(2, [&](int r, test::FakeCommunicator& comm) {
    ShmAllreduceOptions options;
    options.hostKey = "host-" + std::to_string(r);
    created[r] = ShmAllreduce::tryCreate(comm, options) != nullptr;
  });
  for (auto& e : errors) REQUIRE_FALSE(e);
  REQUIRE(created == std::vector<int>{0, 0});
}

TEST_CASE("a rank that leaves fails its waiting peer at once, and the error is sticky", "[shm]") {
  // The budget is far beyond the test's CTest timeout: only the leave flag can end the wait.
  auto errors = onRanks(2, [&](int r, test::FakeCommunicator& comm) {
    ShmAllreduceOptions options;
    options.timeout = std::chrono::seconds(600);
    auto shm = ShmAllreduce::tryCreate(comm, options);
    check(shm != nullptr, "shared memory set up");
    if (r == 1) return;  // leaves without taking part
    std::vector<float> v(10, 1.0f);
    auto reduce = [&] { shm->allreduce(v.data(), v.size(), DataType::kFloat32, ReduceOp::kSum); };
    checkCommError(reduce, "rank 1 (pid");
    checkCommError(reduce, "left the group");  // sticky: the same error again
  });
  for (auto& e : errors) REQUIRE_FALSE(e);
}

TEST_CASE("a rank that never arrives fails its peer after the budget", "[shm]") {
  std::promise<void> peerFailed;
  auto failed = peerFailed.get_future().share();
  auto errors = onRanks(2, [&](int r, test::FakeCommunicator& comm) {
    ShmAllreduceOptions options;
    options.timeout = std::chrono::milliseconds(200);
    auto shm = ShmAllreduce::tryCreate(comm, options);
    check(shm != nullptr, "shared memory set up");
    if (r == 1) {  // stays in the group, silent, until rank 0 gave up
      failed.wait();
      return;
    }
    std::vector<float> v(10, 1.0f);
    try {
      checkCommError([&] { shm->allreduce(v.data(), v.size(), DataType::kFloat32, ReduceOp::kSum); },
                     "did not arrive within 200 ms");
    } catch (...) {
      peerFailed.set_value();
      throw;
    }
    peerFailed.set_value();
  });
  for (auto& e : errors) REQUIRE_FALSE(e);
}
