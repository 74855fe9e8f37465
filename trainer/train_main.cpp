#include "trainer/train_main.hpp"

#include <cstdio>
#include <cstdlib>
#include <future>
#include <string>

#include <fmt/format.h>

#include "rendezvous/base/error.hpp"
#include "rendezvous/base/logging.hpp"
#include "rendezvous/store/metric_points.hpp"
#include "rendezvous/store/tcp_store_client.hpp"
#include "trainer/crc32c.hpp"
#include "trainer/model.hpp"
#include "trainer/trainer.hpp"
#include "worker_runtime/communicator.hpp"
#include "worker_runtime/elastic_group.hpp"
#include "worker_runtime/failure_sequence.hpp"
#include "worker_runtime/progress.hpp"
#include "worker_runtime/standby.hpp"
#include "worker_runtime/worker_env.hpp"

namespace ddp {
namespace {

TrainConfig configWithOverrides(const TrainOptions& o) {
  TrainConfig c = loadTrainConfig(o.config);
  if (o.data) c.data = *o.data;
  if (o.checkpointDir) c.checkpointDir = *o.checkpointDir;
  if (o.metrics) c.metrics = *o.metrics;
  if (o.tensorboardDir) c.tensorboardDir = *o.tensorboardDir;
  if (o.maxSteps) c.maxSteps = *o.maxSteps;
  if (o.backend) c.backend = parseCommBackend(*o.backend);
  validateTrainConfig(c);
  resolveDeviceAndBackend(c, cudaDevicesPresent());
  return c;
}

// Rank 0's metric points go to the worker store of its current quorum (ddprun's agent relays them
// to the status page); the connection is opened at the first point (and again when the quorum's
// store moved), with a 2 s budget for it and for every call.
std::function<void(const std::string&)> workerStorePublisher(const ElasticGroup& group) {
  struct Connection {
    Endpoint endpoint;
    std::unique_ptr<Store> store;
  };
  auto c = std::make_shared<Connection>();
  return [c, &group](const std::string& point) {
    if (!c->store || c->endpoint != group.storeEndpoint()) {
      TcpStoreClientOptions options;
      options.endpoint = c->endpoint = group.storeEndpoint();
      options.connectTimeout = std::chrono::seconds(2);
      options.timeout = std::chrono::seconds(2);
      c->store.reset();
      c->store = std::make_unique<TcpStoreClient>(options);
    }
    writeMetricPoint(*c->store, point);
  };
}

}  // namespace

int runMakeData(const MakeDataOptions& o) {
  setupLogging("", "");
  makeSyntheticData(o);
  std::printf("wrote %llu samples (%u features, %u classes) in %u shards to %s\n",
              static_cast<unsigned long long>(o.samples), o.features, o.classes, o.shards,
              o.out.string().c_str());
  return 0;
}

int runTrain(const TrainOptions& o) {
  // A standby process (ddprun --standby-workers) builds its data, model and optimizer and warms its
  // GEMMs up, with no rank yet; then it waits for the agent to make it a failed worker's
  // replacement (worker_runtime/standby.hpp), and goes on as one with all of that ready. The wait
  // comes after the threads it started ended (the GEMM library's idle pool reads no environment):
  // the environment it receives replaces this one.
  std::shared_ptr<PreparedTrainer> ready;
  if (startedAsStandby()) {
    setupLogging(o.logLevel, "standby");
    const TrainConfig config = configWithOverrides(o);
    if (config.device == TrainDevice::kCpu) {
      ready = prepareTrainer(config);
      warmUpStandby(*ready, config);
    }
  }
  awaitStandbyAssignment();  // also says that this program can be a standby
  const bool distributed = std::getenv("RANK") != nullptr;
  WorkerEnv env;
  if (distributed) env = WorkerEnv::fromEnvironment();
  setupLogging(o.logLevel, distributed ? "rank " + std::to_string(env.rank) : "");
  const TrainConfig config = configWithOverrides(o);
  // With ddprun --restart-scope=failed the group recovers in place, and rank and world size are
  // the quorum's (a replacement process may start in a later quorum than its env names).
  std::unique_ptr<ElasticGroup> group;
  const auto timeout = std::chrono::milliseconds(int64_t(config.commTimeoutS * 1000));
  // The data, model and optimizer are built (and the GEMMs warmed up) while the communicator
  // connects: a replacement process then meets its waiting peers with its model ready.
  std::future<std::shared_ptr<PreparedTrainer>> prepared;
  if (distributed && config.device == TrainDevice::kCpu && !ready) {
    prepared = std::async(std::launch::async, [&config] { return prepareTrainer(config); });
  }
  if (distributed) {
    CommOptions options;
    options.backend = config.backend;
    options.timeout = timeout;
    group = std::make_unique<ElasticGroup>(env, options);
  }
  const GroupView view = group ? group->view() : GroupView{};
  RunContext ctx{view.rank,  view.worldSize, env.localRank,  int(view.id.generation), o.failAtStep,
                 o.failRank, o.hangAtStep,   o.hangRank,
                 // for ddprun --hang-timeout and --straggler-threshold
                 [](int64_t step, double computeS) { reportProgress(step, computeS); }};
  if (group) ctx.publishPoint = workerStorePublisher(*group);
  ctx.localWorldSize = distributed ? view.localWorldSize : 0;
  ctx.onInjectedFailure = [] { claimFailureSequence(); };
  ctx.failGenerations = o.failGenerations;
  ctx.slowRank = o.slowRank;
  ctx.slowMs = o.slowMs;
  ctx.group = group.get();
  ctx.replacement = group && group->joinedLate();
  auto log = logger("trainer");
  if (view.rank == 0 && !ctx.replacement) {
    log->info("training {} on {} with world size {} (generation {}{})", config.data,
              backendName(config.backend), view.worldSize, view.id.generation,
              group && group->recoversInPlace() ? ", recovers in place" : "");
  }
  TrainResult result = train(config, ctx, group ? &group->comm() : nullptr,
                             prepared.valid() ? prepared.get() : std::move(ready));
  if (result.injectedFailure) {
    throw Error("injected failure: rank " + std::to_string(env.rank) + " stops at step " +
                std::to_string(o.failAtStep) + " (--fail-at-step, generation 0" +
                (o.failGenerations > 1
                     ? " to " + std::to_string(o.failGenerations - 1) + ")"
                     : ")"));
  }
  const int finalRank = group ? group->view().rank : 0;
  if (finalRank == 0) {
    // The parameters' CRC-32C: equal across runs means bit-identical training (the recovery tests).
    // A run resumed from a checkpoint of the job's end did no step: no loss or speed of its own.
    const std::string progress =
        result.stepsThisRun > 0
            ? fmt::format("loss {:.4f}, {:.0f} samples/s", result.lastLoss, result.samplesPerS)
            : std::string("no step in this run (it resumed from the final checkpoint)");
    log->info("done: {} steps, epoch {}, {}, params crc32c {:08x}{}", result.steps, result.epoch,
              progress, crc32c(result.params.data(), result.params.size() * sizeof(float)),
              result.recoveries > 0 ? ", " + std::to_string(result.recoveries) +
                                          (result.recoveries == 1 ? " recovery" : " recoveries") +
                                          " in place on this rank"
                                    : "");
  }
  return 0;
}

}  // namespace ddp
