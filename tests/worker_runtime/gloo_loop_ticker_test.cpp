// LoopTicker (worker_runtime/detail/gloo_loop_ticker.hpp): it comes and goes without leaving a
// descriptor or a handler on Gloo's loop, the loop keeps serving the pairs meanwhile, and
// communicators built and torn down with it (as every GlooCommunicator now is) stay correct.
// Its effect on speed is shown by scripts/bench/recovery.sh, not here.
#include <catch2/catch.hpp>

#include <chrono>
#include <filesystem>
#include <vector>

#include <gloo/transport/tcp/device.h>

#include "tests/worker_runtime/rank_threads.hpp"
#include "worker_runtime/detail/gloo_loop_ticker.hpp"
#include "worker_runtime/gloo_communicator.hpp"

namespace {

std::size_t openDescriptors() {
  std::size_t n = 0;
  for (const auto& entry : std::filesystem::directory_iterator("/proc/self/fd")) {
    (void)entry;
    ++n;
  }
  return n;
}

std::shared_ptr<gloo::transport::Device> loopbackDevice() {
  gloo::transport::tcp::attr attr;
  attr.hostname = "127.0.0.1";
  return gloo::transport::tcp::CreateDevice(attr);
}

}  // namespace

TEST_CASE("a ticker leaves no descriptor behind, however often it comes and goes") {
  auto device = loopbackDevice();
  const std::size_t before = openDescriptors();
  for (int i = 0; i < 50; ++i) {
    ddp::detail::LoopTicker ticker(device, std::chrono::microseconds(50));
  }
  CHECK(openDescriptors() == before);
}

TEST_CASE("a ticker may outlive every other user of its device") {
  const std::size_t before = openDescriptors();
  {
    auto device = loopbackDevice();
    ddp::detail::LoopTicker ticker(device);
    device.reset();  // the ticker's reference keeps the loop alive until it has left it
  }
  CHECK(openDescriptors() == before);
}

TEST_CASE("communicators built and destroyed with a ticker reduce exactly and leave nothing open") {
  constexpr int kSize = 4;
  const std::size_t before = openDescriptors();
  for (int round = 0; round < 5; ++round) {
    std::vector<float> got(kSize, -1);
    auto errors = ddp::test::runRanks(kSize, ddp::test::glooOptions(), [&](ddp::Communicator& c) {
      float v = float(c.rank() + 1 + round);
      c.allreduce(&v, 1, ddp::DataType::kFloat32, ddp::ReduceOp::kSum);
      got[c.rank()] = v;
    });
    REQUIRE(ddp::test::firstError(errors).empty());
    for (int r = 0; r < kSize; ++r) CHECK(got[r] == float(kSize * (kSize + 1) / 2 + kSize * round));
  }
  CHECK(openDescriptors() == before);
}
