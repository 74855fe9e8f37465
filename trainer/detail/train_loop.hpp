// TrainLoop: the state and steps of one rank's training (trainer.hpp), shared by trainer.cpp (set-up
// and the step loop) and train_recovery.cpp (recovery in place: a new quorum, the state from a
// peer). Only train() uses it.
//
// Thread safety: one TrainLoop per rank, driven from one thread.
#pragma once

#include <chrono>
#include <cstdint>
#include <future>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "rendezvous/base/error.hpp"
#include "trainer/checkpoint.hpp"
#include "trainer/distributed_sampler.hpp"
#include "trainer/metrics.hpp"
#include "trainer/model.hpp"
#include "trainer/optimizer.hpp"
#include "trainer/reducer.hpp"
#include "trainer/sharded_dataset.hpp"
#include "trainer/shm_allreduce.hpp"
#include "trainer/trainer.hpp"
#include "worker_runtime/state_agreement.hpp"

namespace ddp {

struct PreparedTrainer {
  std::unique_ptr<ShardedDataset> data;
  MlpShape shape;
  std::unique_ptr<Model> model;
  std::unique_ptr<Optimizer> optimizer;  // for world size 1 until the loop sets its own
  std::future<void> warmUp;              // the GEMM warm-up's thread (its destructor joins it)
};

}  // namespace ddp

namespace ddp::detail {

// A step done (its optimizer step applied) whose afterStep has not finished on this rank; or,
// with `complete`, the last logged step whose afterStep finished here (lossMean is then the mean
// over every rank, the line's loss): rank 0 may have died before it wrote that line.
struct InterruptedStep {
  int64_t step = -1;
  float lossMean = 0;  // this rank's mean loss over the steps since the last metrics line
  float gradNorm = 0;
  bool complete = false;
};

class TrainLoop {
 public:
  // `prepared` may be null (then the loop builds data, model and optimizer itself).
  TrainLoop(const TrainConfig& config, const RunContext& ctx, Communicator* comm,
            std::shared_ptr<PreparedTrainer> prepared);
  TrainResult run();

 private:
  using Clock = std::chrono::steady_clock;
  // The agent published a newer quorum: leave the step loop at a step boundary and recover.
  struct QuorumChanged {};
  // No rank of the quorum holds the training state (every process is new): recovery in place is
  // impossible, the worker exits and the agents restart every worker.
  class StateLost : public CommError {
   public:
    using CommError::CommError;
  };

  // -- trainer.cpp --
  void setUpCollectives();  // gradComm_ (shared memory) and reducer_ for comm_
  void setUpSampler();      // sampler_ for ctx_.rank / ctx_.worldSize
  void restoreOrInit();
  bool decideOverlap() const;
  // Runs steps until the job is done (or throws CommError / QuorumChanged).
  void trainUntilDone();
  float runStep(const std::vector<int64_t>& list, std::size_t& pos);
  // The step's collectives (loss mean, parameter check), then reportStep.
  void afterStep(float loss, float gradNorm, bool last);
  // The step's metrics line and checkpoint (rank 0); no collective.
  void reportStep(float loss, float gradNorm, bool logNow, bool last);
  void reportMetrics(float loss, float gradNorm, bool logNow, bool last);
  void checkParams();
  void saveCheckpoint();
  float meanOverRanks(float value);
  int64_t plannedSteps(std::size_t firstEpochLeft) const;
  bool finished() const;
  void advanceEpoch();
  void injectFaults();
  // Collective on a scalar through a buffer of the model's memory kind (NCCL needs device memory).
  float allreduceScalar(float value);
  uint32_t broadcastWord(uint32_t value);

  // -- train_recovery.cpp --
  bool recoversInPlace() const;
  // Joins the newest quorum (retrying while recovery itself fails) and continues from the
  // donor's state. Throws CommError when no quorum comes (the worker then exits).
  void recover(const std::string& why);
  // --fail-at-step's fault at step `step` on this rank: marks the failure, true when it fires.
  bool injectFault(int64_t step);
  // Collective: every rank's (step, hash); the donor's state to every rank that differs.
  void syncState();
  // One buffer of the state, from agreed.donor to the ranks in agreed.differ (every rank calls it).
  void handOver(void* buf, std::size_t bytes, const StateAgreement& agreed);
  void takeState(const StateAgreement& agreed);  // every buffer of the state, by handOver
  StateDigest digest();
  // After the state agreed on step `step`: when some rank's afterStep of that step was
  // interrupted (`reports`, one per rank), every rank finishes it with those ranks' loss; when
  // only ranks that finished it hold it (rank 0 died before its line), rank 0 writes the line.
  void finishInterruptedStep(const std::vector<InterruptedStep>& reports, int64_t step);
  void adoptQuorum();  // ctx_, comm_, metrics_ for the group's current view

  TrainConfig cfg_;
  RunContext ctx_;
  Communicator* comm_;
  ElasticGroup* group_;
  const int startGeneration_;
  std::shared_ptr<PreparedTrainer> prepared_;  // kept until the loop ends: its warm-up may run
  std::unique_ptr<ShardedDataset> data_;
  MlpShape shape_;
  std::unique_ptr<Model> model_;
  std::unique_ptr<Optimizer> optimizer_;
  std::unique_ptr<ShmAllreduce> gradComm_;  // the reducer's, when all ranks share this host
  std::unique_ptr<Reducer> reducer_;
  std::unique_ptr<DistributedSampler> sampler_;
  std::unique_ptr<MetricsSink> metrics_;
  TrainState state_;
  TrainResult result_;
  std::vector<float> x_;
  std::vector<int32_t> y_;
  std::vector<int64_t> ids_;
  int64_t totalSteps_ = 0, samplesSinceLog_ = 0, samplesThisRun_ = 0;
  Clock::time_point lastLog_ = Clock::now();
  float lastGradNorm_ = 0;
  double lastComputeS_ = 0;  // the last step's compute seconds (RunContext::onStep)
  std::shared_ptr<float> scratch_;
  double lossSinceLog_ = 0;  // sum of step losses since the last metrics line
  int64_t stepsSinceLog_ = 0;
  std::optional<InterruptedStep> interrupted_;  // set while afterStep runs its collectives
  std::optional<InterruptedStep> lastLogged_;   // the last logged step's line, complete
  bool collectivesLogged_ = false;  // the reducer's set-up is logged once, not after each recovery
  bool hasState_;  // false for a replacement process until a peer handed it the state
  const GradReadyFn gradHook_ = [this](int t) { reducer_->markReady(t); };  // built once
  const GradReadyFn noHook_;
};

}  // namespace ddp::detail
