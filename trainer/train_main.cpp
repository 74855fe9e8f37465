#include "trainer/train_main.hpp"

#include <cstdio>
#include <cstdlib>

#include "rendezvous/base/error.hpp"
#include "rendezvous/base/logging.hpp"
#include "rendezvous/store/metric_points.hpp"
#include "rendezvous/store/tcp_store_client.hpp"
#include "trainer/model.hpp"
#include "trainer/trainer.hpp"
#include "worker_runtime/communicator.hpp"
#include "worker_runtime/progress.hpp"
#include "worker_runtime/worker_env.hpp"
#include "worker_runtime/worker_store.hpp"

namespace ddp {
namespace {

TrainConfig configWithOverrides(const TrainOptions& o) {
  TrainConfig c = loadTrainConfig(o.config);
  if (o.data) c.data = *o.data;
  if (o.checkpointDir) c.checkpointDir = *o.checkpointDir;
  if (o.metrics) c.metrics = *o.metrics;
  if (o.tensorboardDir) c.tensorboardDir = *o.tensorboardDir;
  if (o.maxSteps) c.maxSteps = *o.maxSteps;
  if (o.backend) c.backend = *o.backend;
  validateTrainConfig(c);
  return c;
}

CommBackend backendFor(const std::string& name) {
  if (name == "gloo") return CommBackend::kGloo;
  if (name == "nccl") return CommBackend::kNccl;
  return CommBackend::kAuto;
}

// Rank 0's metric points go to the worker store (ddprun's agent relays them to the status page);
// the connection is opened at the first point, with a 2 s budget for it and for every call.
std::function<void(const std::string&)> workerStorePublisher(const WorkerEnv& env) {
  auto store = std::make_shared<std::unique_ptr<Store>>();
  return [store, addr = env.masterAddr, port = env.masterPort](const std::string& point) {
    if (!*store) {
      TcpStoreClientOptions options;
      options.host = addr;
      options.port = port;
      options.connectTimeout = std::chrono::seconds(2);
      options.timeout = std::chrono::seconds(2);
      *store = std::make_unique<TcpStoreClient>(options);
    }
    writeMetricPoint(**store, point);
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
  const bool distributed = std::getenv("RANK") != nullptr;
  WorkerEnv env;
  if (distributed) env = WorkerEnv::fromEnvironment();
  setupLogging(o.logLevel, distributed ? "rank " + std::to_string(env.rank) : "");
  TrainConfig config = configWithOverrides(o);
  // The communicator follows the device: NCCL for CUDA, Gloo for CPU.
  if (config.backend == "auto" && config.device != "auto") {
    config.backend = config.device == "cuda" ? "nccl" : "gloo";
  }
  if (config.backend == "auto") config.backend = cudaDevicesPresent() ? "nccl" : "gloo";
  if ((config.device == "cuda" && config.backend == "gloo") ||
      (config.device == "cpu" && config.backend == "nccl")) {
    throw ConfigError("config: device '" + config.device + "' cannot use backend '" +
                      config.backend + "' (cuda needs nccl, cpu needs gloo)");
  }
  RunContext ctx{env.rank,     env.worldSize, env.localRank, env.restartCount, o.failAtStep,
                 o.failRank,   o.hangAtStep,  o.hangRank,
                 [](int64_t step) { reportProgress(step); }};  // for ddprun --hang-timeout
  if (distributed && env.rank == 0 && env.masterPort != 0) ctx.publishPoint = workerStorePublisher(env);
  ctx.localWorldSize = distributed ? env.localWorldSize : 0;

  std::unique_ptr<Store> store;
  std::unique_ptr<Communicator> comm;
  const auto timeout = std::chrono::milliseconds(int64_t(config.commTimeoutS * 1000));
  if (distributed) {
    store = connectWorkerStore(env, timeout);
    CommOptions options;
    options.backend = backendFor(config.backend);
    options.timeout = timeout;
    comm = makeCommunicator(env, *store, options);
  }
  auto log = logger("trainer");
  if (env.rank == 0) {
    log->info("training {} on {} with world size {} (generation {})", config.data,
              config.backend, env.worldSize, env.restartCount);
  }
  TrainResult result = train(config, ctx, comm.get());
  if (result.injectedFailure) {
    throw Error("injected failure: rank " + std::to_string(env.rank) + " stops at step " +
                std::to_string(o.failAtStep) + " (--fail-at-step, generation 0)");
  }
  if (env.rank == 0) {
    log->info("done: {} steps, epoch {}, loss {:.4f}, {:.0f} samples/s", result.steps,
              result.epoch, result.lastLoss, result.samplesPerS);
  }
  return 0;
}

}  // namespace ddp
