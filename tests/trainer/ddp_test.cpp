// Trainer + Reducer with ranks as threads over FakeCommunicator: DDP equivalence, accumulation
// equivalence, checkpoint/resume equivalence (also onto another world size), error propagation.
//
// Tolerance: parameters of runs that differ only in how the same gradient sum is split (ranks,
// micro-batches) agree within 1e-5 absolute + 1e-4 relative after 12 steps (fp32 summation
// order); an interrupted-and-resumed run equals the uninterrupted one bit for bit.
#include <catch2/catch.hpp>

#include <cmath>
#include <thread>

#include "rendezvous/base/error.hpp"
#include "tests/fakes/fake_communicator.hpp"
#include "tests/trainer/test_support.hpp"
#include "trainer/checkpoint.hpp"
#include "trainer/cpu_mlp.hpp"
#include "trainer/reducer.hpp"
#include "trainer/make_data.hpp"
#include "trainer/trainer.hpp"

using namespace ddp;

namespace {

std::string dataset() {
  static const std::string dir = [] {
    auto d = test::scratchDir("ddp-data");
    makeSyntheticData({d, 256, 8, 4, 3, 5});
    return d.string();
  }();
  return dir;
}

TrainConfig baseConfig(int batch, int accum) {
  TrainConfig c;
  c.data = dataset();
  c.hidden = {16, 12};
  c.device = TrainDevice::kCpu;
  c.seed = 3;
  c.epochs = 3;
  c.maxSteps = 12;
  c.batchSize = batch;
  c.gradAccum = accum;
  c.optimizer.type = "sgd";
  c.optimizer.lr = 0.05f;
  c.optimizer.momentum = 0.9f;
  c.bucketMb = 0.0005;  // ~512 bytes: several buckets, so the overlap path is exercised
  c.progressSeconds = 1e9;
  return c;
}

struct RankRuns {
  std::vector<TrainResult> results;
  std::vector<std::exception_ptr> errors;
};

// Runs `world` ranks as threads. A rank that stops (error or injected failure) aborts the group,
// so its peers get CommError as they would from a real communicator, instead of hanging.
RankRuns runRanksRaw(int world, const TrainConfig& config, int generation = 0,
                     int64_t failAtStep = -1, int failAtCall = 0) {
  auto group = std::make_shared<test::FakeGroup>(world);
  if (failAtCall) group->failAtCall(failAtCall);
  RankRuns runs{std::vector<TrainResult>(world), std::vector<std::exception_ptr>(world)};
  std::vector<std::thread> threads;
  for (int r = 0; r < world; ++r) {
    threads.emplace_back([&, r] {
      try {
        test::FakeCommunicator comm(group, r);
        RunContext ctx{r, world, 0, generation, failAtStep, 0, -1, -1, {}};
        runs.results[r] = train(config, ctx, &comm);
        if (runs.results[r].injectedFailure) group->abort();
      } catch (...) {
        runs.errors[r] = std::current_exception();
        group->abort();
      }
    });
  }
  for (auto& t : threads) t.join();
  return runs;
}

std::vector<TrainResult> runRanks(int world, const TrainConfig& config, int generation = 0) {
  auto runs = runRanksRaw(world, config, generation);
  for (auto& e : runs.errors) {
    if (e) std::rethrow_exception(e);
  }
  return runs.results;
}

void requireClose(const std::vector<float>& a, const std::vector<float>& b) {
  REQUIRE(a.size() == b.size());
  double worst = 0;
  for (std::size_t i = 0; i < a.size(); ++i) {
    double d = std::abs(double(a[i]) - b[i]);
    worst = std::max(worst, d);
    INFO("parameter " << i << ": " << a[i] << " vs " << b[i]);
    REQUIRE(d <= 1e-5 + 1e-4 * std::abs(double(b[i])));
  }
  UNSCOPED_INFO("largest difference " << worst);
}

}  // namespace

TEST_CASE("2 ranks x batch b equal 1 rank x batch 2b", "[ddp]") {
  auto single = runRanks(1, baseConfig(16, 1));
  auto pair = runRanks(2, baseConfig(8, 1));
  REQUIRE(single[0].steps == 12);
  REQUIRE(pair[0].steps == 12);
  REQUIRE(pair[0].params == pair[1].params);  // DDP keeps ranks bit-identical
  requireClose(pair[0].params, single[0].params);
  auto init = runRanks(1, [] { auto c = baseConfig(16, 1); c.maxSteps = 1; c.optimizer.lr = 1e-9f; return c; }());
  REQUIRE(init[0].params != single[0].params);  // training moved the parameters
}

TEST_CASE("gradient accumulation equals one larger batch", "[ddp]") {
  auto single = runRanks(1, baseConfig(16, 1));
  auto accum = runRanks(1, baseConfig(8, 2));
  requireClose(accum[0].params, single[0].params);
  auto both = runRanks(2, baseConfig(4, 2));  // 2 ranks x 4 x 2 micro-steps
  REQUIRE(both[0].params == both[1].params);
  requireClose(both[0].params, single[0].params);
}

TEST_CASE("interrupted and resumed equals uninterrupted", "[ddp][checkpoint]") {
  auto config = baseConfig(8, 1);
  config.optimizer.type = "adamw";
  config.optimizer.lr = 0.01f;
  config.maxSteps = 40;  // crosses an epoch boundary (256 / 16 = 16 steps per epoch)
  auto full = runRanks(2, config);

  config.checkpointDir = test::scratchDir("resume-ckpt").string();
  config.checkpointEvery = 5;
  auto first = runRanksRaw(2, config, /*generation=*/0, /*failAtStep=*/23);
  REQUIRE(first.results[0].injectedFailure);
  REQUIRE_THROWS_AS(std::rethrow_exception(first.errors[1]), CommError);  // its peer is gone
  auto saved = loadCheckpoint(config.checkpointDir);
  REQUIRE(saved);
  REQUIRE(saved->state.step == 20);
  REQUIRE(saved->state.epoch == 1);
  REQUIRE(saved->state.consumed == 4 * 16);

  auto second = runRanksRaw(2, config, /*generation=*/1, /*failAtStep=*/23).results;
  REQUIRE(second[0].resumed);
  REQUIRE_FALSE(second[0].injectedFailure);  // fault injection only fires in generation 0
  REQUIRE(second[0].steps == 40);
  REQUIRE(second[0].stepsThisRun == 20);
  REQUIRE(second[0].params == full[0].params);
  REQUIRE(loadCheckpoint(config.checkpointDir)->state.step == 40);
}

TEST_CASE("a checkpoint from 2 ranks resumes on 3 with the rest of the epoch re-sharded", "[ddp][checkpoint]") {
  auto config = baseConfig(8, 1);
  config.epochs = 1;
  config.maxSteps = 0;
  config.checkpointDir = test::scratchDir("reshard-ckpt").string();
  config.checkpointEvery = 5;
  auto first = runRanksRaw(2, config, 0, /*failAtStep=*/6);
  REQUIRE(first.results[0].injectedFailure);
  REQUIRE(loadCheckpoint(config.checkpointDir)->state.consumed == 5 * 16);

  auto second = runRanks(3, config, 1);
  // 256 - 80 = 176 samples left, padded to 177 over 3 ranks: 59 each => 8 steps of <= 8.
  REQUIRE(second[0].stepsThisRun == 8);
  REQUIRE(second[0].steps == 13);
  REQUIRE(second[0].epoch == 1);
  REQUIRE(second[0].params == second[2].params);
  auto ckpt = loadCheckpoint(config.checkpointDir);
  REQUIRE(ckpt->state.worldSize == 3);
  REQUIRE(ckpt->state.epoch == 1);
}

TEST_CASE("a failed collective surfaces as CommError on every rank", "[ddp]") {
  auto config = baseConfig(8, 1);
  config.shmAllreduce = false;  // so the gradient buckets go through the failing communicator
  config.commOverlap = GENERATE(as<std::string>{}, "on", "off");
  INFO("comm_overlap " << config.commOverlap);
  auto runs = runRanksRaw(2, config, 0, -1, /*failAtCall=*/7);
  for (auto& e : runs.errors) REQUIRE_THROWS_AS(std::rethrow_exception(e), CommError);
}

TEST_CASE("comm_overlap off reduces after backward: the same parameters bit for bit", "[ddp]") {
  auto config = baseConfig(8, 1);  // several buckets (bucket_mb ~512 bytes)
  config.shmAllreduce = GENERATE(true, false);
  INFO("shm_allreduce " << config.shmAllreduce);
  config.commOverlap = "on";
  auto overlapped = runRanks(2, config);
  config.commOverlap = "off";
  auto after = runRanks(2, config);
  REQUIRE(after[0].steps == 12);
  REQUIRE(after[0].params == after[1].params);
  REQUIRE(after[0].params == overlapped[0].params);  // same sums in the same order
}

TEST_CASE("comm_overlap auto: overlap unless shared-memory sums already fill the CPUs", "[reducer]") {
  // (sharedMemory, ranks on this host, compute threads per rank, CPUs)
  CHECK_FALSE(overlapGradientAllreduce(true, 2, 1, 2));  // 2 workers on 2 cores: no spare core
  CHECK_FALSE(overlapGradientAllreduce(true, 4, 1, 2));  // oversubscribed
  CHECK_FALSE(overlapGradientAllreduce(true, 2, 4, 8));  // the GEMM threads take every core
  CHECK(overlapGradientAllreduce(true, 2, 1, 4));        // spare cores for the sums
  CHECK(overlapGradientAllreduce(false, 2, 1, 2));       // Gloo / NCCL: latency to hide
  CHECK(overlapGradientAllreduce(false, 8, 16, 8));
}

TEST_CASE("a checkpoint for another model is refused", "[checkpoint]") {
  auto config = baseConfig(8, 1);
  config.maxSteps = 2;
  config.checkpointDir = test::scratchDir("other-model").string();
  runRanks(1, config);
  config.hidden = {16};
  REQUIRE_THROWS_AS(runRanks(1, config), ConfigError);
}

TEST_CASE("buckets are contiguous, last layer first, the first capped at 1 MiB", "[reducer]") {
  auto group = std::make_shared<test::FakeGroup>(2);
  test::FakeCommunicator comm(group, 0);
  // tensors (floats): 0: 512K (2 MiB), 1: 1K, 2: 256K (1 MiB), 3: 256, 4: 2560, 5: 10
  CpuMlp model({512, {1024, 256}, 10});
  Reducer reducer(model, &comm, ReducerOptions{});
  const auto& buckets = reducer.buckets();
  REQUIRE(buckets.size() == 2);
  REQUIRE(buckets[0].tensors == std::vector<int>{5, 4, 3});  // tensor 2 would pass 1 MiB
  REQUIRE(buckets[1].tensors == std::vector<int>{2, 1, 0});  // then the 25 MiB cap
  std::size_t end = model.numParams();
  for (const auto& b : buckets) {
    REQUIRE(b.offset + b.count == end);  // contiguous, from the end of the flat buffer
    end = b.offset;
  }
  REQUIRE(end == 0);
  Reducer small(model, &comm, ReducerOptions{4096, 1u << 20});
  REQUIRE(small.buckets().size() > 3);  // bucket_mb smaller than the first-bucket cap wins
}

TEST_CASE("a trainer prepared ahead trains bit for bit like one train() builds", "[ddp][prepare]") {
  // prepareTrainer's model and optimizer are made before the world size is known (for 1) and its
  // GEMM warm-up runs on a throwaway model: neither may change a single bit of the run.
  TrainConfig config = baseConfig(8, 1);
  config.optimizer.type = "adamw";
  config.optimizer.lr = 0.01f;
  config.optimizer.lrScaling = "linear";  // the world size matters: set once the rank knows it
  const auto built = runRanks(2, config);
  auto group = std::make_shared<test::FakeGroup>(2);
  std::vector<TrainResult> prepared(2);
  std::vector<std::exception_ptr> errors(2);
  std::vector<std::thread> threads;
  for (int r = 0; r < 2; ++r) {
    threads.emplace_back([&, r] {
      try {
        auto ahead = prepareTrainer(config);
        test::FakeCommunicator comm(group, r);
        RunContext ctx{r, 2, 0, 0, -1, 0, -1, -1, {}};
        prepared[r] = train(config, ctx, &comm, std::move(ahead));
      } catch (...) {
        errors[r] = std::current_exception();
        group->abort();
      }
    });
  }
  for (auto& t : threads) t.join();
  for (int r = 0; r < 2; ++r) {
    if (errors[r]) std::rethrow_exception(errors[r]);
    REQUIRE(prepared[r].steps == built[r].steps);
    REQUIRE(prepared[r].params == built[r].params);
  }
  TrainConfig cuda = config;
  cuda.device = TrainDevice::kCuda;
  REQUIRE_THROWS_AS(prepareTrainer(cuda), ConfigError);
}
