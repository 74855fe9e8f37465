#include "trainer/trainer.hpp"

#include <sched.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <optional>
#include <thread>

#include "rendezvous/base/error.hpp"
#include "rendezvous/base/logging.hpp"
#include "trainer/crc32c.hpp"
#include "trainer/detail/train_loop.hpp"
#include "worker_runtime/elastic_group.hpp"

namespace ddp {
namespace {

int64_t ceilDiv(int64_t a, int64_t b) { return (a + b - 1) / b; }

// --hang-at-step: this rank stops inside a step for good, as a rank stuck in a kernel or a dead
// lock would; its peers wait in the step's allreduce. The line (with CLOCK_MONOTONIC, which the
// hang tests share with this process) goes to stderr first. Never inlined: its name is what the
// tests look for in the stacks.
[[noreturn]] __attribute__((noinline)) void injectedHang(int rank, int64_t step) {
  const double now =
      std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch()).count();
  std::fprintf(stderr, "injected hang: rank %d sleeps in step %lld from monotonic %.3f\n", rank,
               static_cast<long long>(step + 1), now);
  std::fflush(stderr);
  while (true) std::this_thread::sleep_for(std::chrono::hours(1));
}

}  // namespace

namespace detail {

TrainLoop::TrainLoop(const TrainConfig& config, const RunContext& ctx, Communicator* comm,
                     std::shared_ptr<PreparedTrainer> prepared)
    : cfg_(config),
      ctx_(ctx),
      comm_(ctx.worldSize > 1 ? comm : nullptr),
      group_(ctx.group),
      startGeneration_(ctx.generation),
      hasState_(!ctx.replacement) {
  if (ctx_.worldSize > 1 && !comm) throw ConfigError("trainer: world size > 1 needs a communicator");
  if (prepared) {
    prepared_ = prepared;  // its warm-up may still run
    data_ = std::move(prepared->data);
    shape_ = prepared->shape;
    model_ = std::move(prepared->model);
    optimizer_ = std::move(prepared->optimizer);
    optimizer_->setWorldSize(ctx_.worldSize);
  } else {
    data_ = std::make_unique<ShardedDataset>(cfg_.data);
    shape_ = {int(data_->features()), cfg_.hidden, int(data_->classes())};
    model_ = makeModel(cfg_.device, shape_, ctx_.localRank, cfg_.bf16);
    optimizer_ = std::make_unique<Optimizer>(*model_, cfg_.optimizer, ctx_.worldSize);
  }
  setUpSampler();
  // Before the state: a replacement for rank 0 may write a step's line as it takes the state
  // (syncState), after the lines the process it replaces wrote.
  if (ctx_.rank == 0) {
    metrics_ =
        std::make_unique<MetricsSink>(cfg_.metrics, cfg_.tensorboardDir, cfg_.progressSeconds);
    if (ctx_.replacement) metrics_->skipLoggedSteps();
    if (ctx_.publishPoint) metrics_->publishTo(ctx_.publishPoint);
  }
  // The state first, then the collectives built on the communicator: the order in which the
  // survivors of a recovery in place run them too (train_recovery.cpp), so a replacement
  // process meets them there.
  try {
    restoreOrInit();
    setUpCollectives();
  } catch (const StateLost&) {
    throw;
  } catch (const CommError& e) {
    // A peer failed while this rank met the others (a replacement taking the state, a new
    // generation's ranks comparing theirs): recovered like a failed step, not by an exit that
    // would cost this process and a restart.
    if (!recoversInPlace()) throw;
    recover(e.what());
  }
}

void TrainLoop::setUpCollectives() {
  gradComm_.reset();
  const bool oneNode = ctx_.localWorldSize == 0 || ctx_.localWorldSize == ctx_.worldSize;
  if (comm_ && cfg_.shmAllreduce && oneNode && !model_->onDevice()) {
    ShmAllreduceOptions shm;
    shm.timeout = std::chrono::milliseconds(int64_t(cfg_.commTimeoutS * 1000));
    if (recoversInPlace()) {
      shm.quorumEpoch = group_->quorumEpoch();
      shm.quorumEpochSeen = group_->builtAtEpoch();
    }
    // No allreduce is larger than the gradients: a slot sized to them, not the 4 MiB default,
    // keeps the segment (allocated and mapped again at every recovery in place) small.
    shm.chunkFloats = std::min(shm.chunkFloats, (model_->numParams() + 15) / 16 * 16);
    gradComm_ = ShmAllreduce::tryCreate(*comm_, shm);
  }
  ReducerOptions reducer{std::size_t(cfg_.bucketMb * 1024 * 1024)};
  reducer.overlap = decideOverlap();
  if (comm_ && ctx_.rank == 0 && !collectivesLogged_) {
    collectivesLogged_ = true;
    logger("trainer")->info(
        "gradient allreduce: {}, {} (comm_overlap {})",
        gradComm_ ? "shared memory (all ranks on this host)" : "the communicator",
        reducer.overlap ? "on a communication thread during backward"
                        : "on the training thread after backward",
        cfg_.commOverlap);
  }
  reducer_.reset();
  reducer_ = std::make_unique<Reducer>(*model_, gradComm_ ? gradComm_.get() : comm_, reducer);
}

void TrainLoop::setUpSampler() {
  sampler_ = std::make_unique<DistributedSampler>(SamplerOptions{
      int64_t(data_->size()), ctx_.worldSize, ctx_.rank, cfg_.shuffle, cfg_.seed, cfg_.dropLast});
}

void TrainLoop::restoreOrInit() {
  // A replacement process takes every parameter from a peer (syncState): no initialisation to pay
  // for while the survivors wait.
  std::vector<float> params;
  if (!ctx_.replacement) params = initMlpParams(shape_, cfg_.seed);
  state_ = {0, 0, 0, 0, ctx_.worldSize, ctx_.worldSize, ctx_.generation, cfg_.seed, cfg_.seed};
  std::optional<Checkpoint> ckpt;
  if (ctx_.rank == 0 && !ctx_.replacement && !cfg_.checkpointDir.empty()) {
    if (const std::size_t n = removeStaleTemporaries(cfg_.checkpointDir)) {
      logger("trainer")->info("removed {} temporary checkpoint file(s) a killed writer left in {}",
                              n, cfg_.checkpointDir);
    }
  }
  // A replacement process takes the whole state from a peer (syncState), never from disk.
  if (!cfg_.checkpointDir.empty() && !ctx_.replacement) ckpt = loadCheckpoint(cfg_.checkpointDir);
  if (ckpt) {
    if (ckpt->shape.inputs != shape_.inputs || ckpt->shape.hidden != shape_.hidden ||
        ckpt->shape.classes != shape_.classes || ckpt->optimizer != cfg_.optimizer.type) {
      throw ConfigError("checkpoint in " + cfg_.checkpointDir +
                        " was written for another model or optimizer; remove it or change "
                        "checkpoint_dir");
    }
    params = ckpt->params;
    optimizer_->loadState(ckpt->optimizerState);
    state_ = ckpt->state;
    result_.resumed = true;
    if (ctx_.rank == 0) {
      logger("trainer")->info("resuming from {} at step {} (epoch {}, written by world size {})",
                              checkpointPath(cfg_.checkpointDir).string(), state_.step,
                              state_.epoch, state_.worldSize);
    }
  }
  if (!params.empty()) model_->upload(params.data(), model_->params(), params.size());
  if (recoversInPlace()) {
    // The survivors of a recovery in place run syncState too: this is where a replacement
    // process meets them (and where a fresh generation's ranks check they agree).
    if (comm_) {
      syncState();
    } else if (!hasState_) {
      // A replacement alone in its world: no peer holds the state it would take.
      group_->markStateLost();
      throw StateLost("quorum " + toString(group_->view().id) + ": a replacement process alone "
                      "in its world has no peer to take the training state from");
    }
  } else if (comm_) {
    // DDP's constructor broadcasts rank 0's parameters; doing the same guards against any drift.
    comm_->broadcast(model_->params(), model_->numParams() * sizeof(float), 0);
  }
  model_->zeroGrads();
}

int64_t TrainLoop::plannedSteps(std::size_t firstEpochLeft) const {
  const int64_t b = cfg_.batchSize, a = cfg_.gradAccum;
  int64_t perEpoch = ceilDiv(ceilDiv(sampler_->numSamples(), b), a);
  int64_t total = state_.step + ceilDiv(ceilDiv(int64_t(firstEpochLeft), b), a) +
                  std::max<int64_t>(0, cfg_.epochs - state_.epoch - 1) * perEpoch;
  return cfg_.maxSteps > 0 ? std::min(total, cfg_.maxSteps) : total;
}

bool TrainLoop::decideOverlap() const {
  if (cfg_.commOverlap != "auto") return cfg_.commOverlap == "on";
  cpu_set_t set;
  CPU_ZERO(&set);
  const int cpus = sched_getaffinity(0, sizeof(set), &set) == 0
                       ? CPU_COUNT(&set)
                       : int(std::max(1u, std::thread::hardware_concurrency()));
  // The CPU model's GEMMs use OMP_NUM_THREADS threads (all CPUs when it is unset).
  int computeThreads = cpus;
  if (const char* omp = std::getenv("OMP_NUM_THREADS")) {
    char* end = nullptr;
    const long n = std::strtol(omp, &end, 10);
    if (end != omp && *end == '\0' && n > 0) computeThreads = int(std::min<long>(n, cpus));
  }
  const int local = ctx_.localWorldSize > 0 ? ctx_.localWorldSize : ctx_.worldSize;
  return overlapGradientAllreduce(gradComm_ != nullptr, local, computeThreads, cpus);
}

float TrainLoop::allreduceScalar(float value) {
  if (!scratch_) scratch_ = model_->allocBuffer(1);
  model_->upload(&value, scratch_.get(), 1);
  model_->synchronize();
  comm_->allreduce(scratch_.get(), 1, DataType::kFloat32, ReduceOp::kSum);
  model_->download(scratch_.get(), &value, 1);
  return value;
}

uint32_t TrainLoop::broadcastWord(uint32_t value) {
  if (!scratch_) scratch_ = model_->allocBuffer(1);
  float bits;
  std::memcpy(&bits, &value, 4);
  model_->upload(&bits, scratch_.get(), 1);
  model_->synchronize();
  comm_->broadcast(scratch_.get(), 4, 0);
  model_->download(scratch_.get(), &bits, 1);
  std::memcpy(&value, &bits, 4);
  return value;
}

float TrainLoop::meanOverRanks(float value) {
  if (!comm_) return value;
  return allreduceScalar(value) / float(ctx_.worldSize);
}

float TrainLoop::runStep(const std::vector<int64_t>& list, std::size_t& pos) {
  const std::size_t b = std::size_t(cfg_.batchSize);
  const int micro = int(std::min<std::size_t>(cfg_.gradAccum, (list.size() - pos + b - 1) / b));
  double lossSum = 0;
  int64_t samples = 0;
  const auto begin = Clock::now();
  Clock::duration waited{};  // in the reducer's finish(): waiting for peers, not compute
  for (int m = 0; m < micro; ++m) {
    const std::size_t n = std::min(b, list.size() - pos);
    ids_.assign(list.begin() + std::ptrdiff_t(pos), list.begin() + std::ptrdiff_t(pos + n));
    x_.resize(n * data_->features());  // these three allocate in the first step only
    y_.resize(n);
    data_->gather(ids_, x_.data(), y_.data());
    const bool sync = m == micro - 1;
    const float scale = 1.0f / float(n * std::size_t(ctx_.worldSize) * std::size_t(micro));
    if (sync) reducer_->prepare();
    if (sync && ctx_.rank == ctx_.slowRank && ctx_.slowMs > 0) {  // fault injection
      std::this_thread::sleep_for(std::chrono::milliseconds(ctx_.slowMs));
    }
    lossSum += model_->trainBatch(x_.data(), y_.data(), int(n), scale, sync ? gradHook_ : noHook_);
    if (sync) {
      const auto wait = Clock::now();
      reducer_->finish();
      waited += Clock::now() - wait;
    }
    pos += n;
    samples += int64_t(n);
  }
  state_.consumed += samples * ctx_.worldSize;
  samplesSinceLog_ += samples * ctx_.worldSize;
  samplesThisRun_ += samples * ctx_.worldSize;
  lastGradNorm_ = optimizer_->step(state_.step);
  model_->zeroGrads();
  ++state_.step;
  lastComputeS_ = std::chrono::duration<double>(Clock::now() - begin - waited).count();
  return float(lossSum / micro);
}

void TrainLoop::checkParams() {
  std::vector<float> host(model_->numParams());
  model_->synchronize();
  model_->download(model_->params(), host.data(), host.size());
  uint32_t mine = crc32c(host.data(), host.size() * sizeof(float));
  uint32_t root = broadcastWord(mine);
  float mismatch = allreduceScalar(mine == root ? 0.0f : 1.0f);
  if (mismatch > 0) {
    throw CommError("parameters differ across ranks after step " + std::to_string(state_.step) +
                    ": " + std::to_string(int(mismatch)) + " rank(s) disagree with rank 0 (rank " +
                    std::to_string(ctx_.rank) + " crc " + std::to_string(mine) + ", rank 0 crc " +
                    std::to_string(root) + ")");
  }
}

void TrainLoop::saveCheckpoint() {
  Checkpoint c;
  c.state = state_;
  c.state.worldSize = ctx_.worldSize;
  c.state.generation = ctx_.generation;
  c.optimizer = cfg_.optimizer.type;
  c.shape = shape_;
  c.params.resize(model_->numParams());
  model_->synchronize();
  model_->download(model_->params(), c.params.data(), c.params.size());
  c.optimizerState = optimizer_->saveState();
  ddp::saveCheckpoint(cfg_.checkpointDir, c);
}

// A step's metrics line is written before its checkpoint: a kill between the two then repeats the
// line when the step is redone after the resume, instead of losing it. A step whose collectives
// here fail (a peer died) is done: the recovery in place finishes it (finishInterruptedStep).
void TrainLoop::afterStep(float loss, float gradNorm, bool last) {
  const int64_t step = state_.step;
  lossSinceLog_ += loss;
  ++stepsSinceLog_;
  interrupted_ = InterruptedStep{step, float(lossSinceLog_ / double(stepsSinceLog_)), gradNorm};
  if (cfg_.checkParamsEvery > 0 && comm_ && step % cfg_.checkParamsEvery == 0) checkParams();
  const bool logNow = last || step % cfg_.logEvery == 0;
  if (logNow) {
    loss = meanOverRanks(interrupted_->lossMean);  // the same condition on every rank
    lastLogged_ = InterruptedStep{step, loss, gradNorm, /*complete=*/true};
  }
  interrupted_.reset();
  if (logNow && ctx_.failBeforeMetricsLine && injectFault(step)) return;
  reportStep(loss, gradNorm, logNow, last);
}

void TrainLoop::reportStep(float loss, float gradNorm, bool logNow, bool last) {
  const int64_t step = state_.step;
  if (logNow) {
    result_.lastLoss = loss;
    lossSinceLog_ = 0;
    stepsSinceLog_ = 0;
  }
  if (metrics_) reportMetrics(loss, gradNorm, logNow, last);
  if (ctx_.rank == 0 && !cfg_.checkpointDir.empty() &&
      (last || (cfg_.checkpointEvery > 0 && step % cfg_.checkpointEvery == 0))) {
    saveCheckpoint();
  }
}

void TrainLoop::reportMetrics(float loss, float gradNorm, bool logNow, bool last) {
  const int64_t step = state_.step;
  auto now = Clock::now();
  double elapsed = std::chrono::duration<double>(now - lastLog_).count();
  StepMetrics m{step, state_.epoch, totalSteps_, loss, optimizer_->lrAt(step - 1), gradNorm,
                elapsed > 0 ? double(samplesSinceLog_) / elapsed : 0.0, ctx_.worldSize,
                ctx_.generation};
  if (logNow) {
    metrics_->log(m, last);
    samplesSinceLog_ = 0;
    lastLog_ = now;
  }
  if (!logNow && result_.lastLoss > 0) m.loss = result_.lastLoss;  // steadier than one step
  metrics_->progress(m, last);
}

bool TrainLoop::finished() const {
  return state_.epoch >= cfg_.epochs || (cfg_.maxSteps > 0 && state_.step >= cfg_.maxSteps);
}

void TrainLoop::advanceEpoch() {
  state_ = {state_.epoch + 1, state_.step, 0, 0, ctx_.worldSize, ctx_.worldSize, ctx_.generation,
            state_.samplerSeed, state_.initSeed};
}

bool TrainLoop::injectFault(int64_t step) {
  if (ctx_.replacement || ctx_.rank != ctx_.failRank || step != ctx_.failAtStep ||
      startGeneration_ >= ctx_.failGenerations) {
    return false;
  }
  result_.injectedFailure = true;
  if (ctx_.onInjectedFailure) ctx_.onInjectedFailure();
  return true;
}

void TrainLoop::injectFaults() {
  if (ctx_.replacement) return;
  if (!ctx_.failBeforeMetricsLine) injectFault(state_.step);
  if (ctx_.rank == ctx_.hangRank && state_.step == ctx_.hangAtStep && startGeneration_ == 0) {
    injectedHang(ctx_.rank, state_.step);
  }
}

void TrainLoop::trainUntilDone() {
  auto resume = sampler_->resume(state_.epoch, state_.shardBase, state_.consumed, state_.shardWorld);
  state_.shardBase = resume.base;
  state_.shardWorld = ctx_.worldSize;
  totalSteps_ = plannedSteps(resume.indices.size());
  std::vector<int64_t> list = std::move(resume.indices);
  while (!finished()) {
    if (list.empty()) {  // an epoch finished before the checkpoint, or nothing to sample
      if (sampler_->numSamples() == 0) {
        throw ConfigError("trainer: with drop_last the dataset has no sample for each rank");
      }
      advanceEpoch();
      if (!finished()) list = sampler_->indices(state_.epoch);
      continue;
    }
    std::size_t pos = 0;
    while (pos < list.size() && !finished()) {
      injectFaults();
      if (result_.injectedFailure) return;
      // A step boundary: a quorum the agent published (a node added, a rank replaced) is joined
      // here, before this rank starts collectives of the old one.
      if (group_ && group_->quorumChanged()) throw QuorumChanged{};
      float loss = runStep(list, pos);
      if (pos >= list.size()) advanceEpoch();  // the checkpoint then points at the next epoch
      afterStep(loss, lastGradNorm_, finished());
      if (ctx_.onStep) ctx_.onStep(state_.step, lastComputeS_);
    }
    if (pos >= list.size()) list = finished() ? std::vector<int64_t>{} : sampler_->indices(state_.epoch);
  }
}

TrainResult TrainLoop::run() {
  const auto start = Clock::now();
  const int64_t firstStep = state_.step;
  while (true) {
    try {
      trainUntilDone();
      break;
    } catch (const QuorumChanged&) {
      recover("the agent published a new quorum");
    } catch (const CommError& e) {
      if (!recoversInPlace()) throw;
      recover(e.what());
    }
  }
  // From here on a failed peer cannot be replaced: its replacement would wait for this rank.
  if (recoversInPlace() && !result_.injectedFailure) group_->markFinished();
  double wall = std::chrono::duration<double>(Clock::now() - start).count();
  result_.steps = state_.step;
  result_.stepsThisRun = state_.step - firstStep;
  result_.epoch = state_.epoch;
  result_.samplesPerS = wall > 0 ? double(samplesThisRun_) / wall : 0.0;
  result_.params.resize(model_->numParams());
  model_->synchronize();
  model_->download(model_->params(), result_.params.data(), result_.params.size());
  return std::move(result_);
}

}  // namespace detail

TrainResult train(const TrainConfig& config, const RunContext& context, Communicator* comm,
                  std::shared_ptr<PreparedTrainer> prepared) {
  detail::TrainLoop loop(config, context, comm, std::move(prepared));
  return loop.run();
}

}  // namespace ddp
