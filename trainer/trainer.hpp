// Trainer: the data-parallel training loop of the `train` binary.
//
// One Trainer per rank. Per optimizer step: grad_accum micro-batches from this rank's
// DistributedSampler list; the last one is the synchronised backward whose buckets the Reducer
// allreduces while backward runs; then clipping, the optimizer and zeroing. Rank 0 writes
// metrics and checkpoints. At start every rank loads the checkpoint when one exists (any world
// size; see DistributedSampler's resume rule) and rank 0's parameters are broadcast so all ranks
// start identical.
//
// Thread safety: run() is called once, on one thread. Several Trainers (ranks) may run on
// different threads of one process when each has its own Communicator (tests do this).
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "trainer/train_config.hpp"
#include "worker_runtime/communicator.hpp"

namespace ddp {

class ElasticGroup;

struct RunContext {
  int rank = 0;
  int worldSize = 1;
  int localRank = 0;        // CUDA device index
  int generation = 0;       // TORCHELASTIC_RESTART_COUNT
  int64_t failAtStep = -1;  // fault injection: stop with injectedFailure ...
  int failRank = -1;        // ... on this rank after this many steps, generation 0 only
  int64_t hangAtStep = -1;  // fault injection: sleep for good inside step hangAtStep + 1 ...
  int hangRank = -1;        // ... on this rank, generation 0 only (hang detection tests)
  // Called after every optimizer step with the steps done so far and that step's compute seconds:
  // its wall time less the time spent waiting for the gradients' allreduce to finish (the
  // reducer's finish()) — the part of the step that does not wait on peers, which in synchronous
  // training is what tells a slow rank apart (train: worker_runtime's reportProgress, for ddprun's
  // hang and straggler detection). May be empty.
  std::function<void(int64_t step, double computeSeconds)> onStep{};
  // Rank 0: where its metric points go for the status page (MetricsSink::publishTo); may be empty.
  std::function<void(const std::string& point)> publishPoint{};
  // LOCAL_WORLD_SIZE, or 0 when unknown (ranks as threads in tests). The shared-memory gradient
  // allreduce is only tried when it is 0 or the whole world (one node).
  int localWorldSize = 0;
  // Called where --fail-at-step fires, before anything is torn down (train: worker_runtime's
  // claimFailureSequence, so the injected failure takes its place in the job's failure order
  // before a peer notices this rank leave). May be empty.
  std::function<void()> onInjectedFailure{};
  // --fail-generations: --fail-at-step fires in generations 0 .. failGenerations - 1 (a crash
  // that repeats after every restart: ddprun's verdict tests). 1 = generation 0 only.
  int failGenerations = 1;
  // Tests: failAtStep fires after that step's loss was averaged over the ranks, before its
  // metrics line (a logged step), instead of at the start of the next step.
  bool failBeforeMetricsLine = false;
  // In-place recovery (docs/recovery.md): the group whose communicator `comm` is. With a group
  // that recovers in place, a failed collective or a new quorum makes the loop rebuild the group
  // and continue from a peer's state instead of throwing; rank and world size follow the quorum.
  // Null: no recovery (comm alone).
  ElasticGroup* group = nullptr;
  // This process replaces a failed one inside its generation: its state comes from a peer (no
  // checkpoint is read) and fault injection is off.
  bool replacement = false;
  // Fault injection (straggler detection tests): rank slowRank sleeps slowMs milliseconds in every
  // step, before its synchronised backward — counted in its compute time. -1 / 0: off.
  int slowRank = -1;
  int slowMs = 0;
};

struct TrainResult {
  int64_t steps = 0;            // optimizer steps done in total (including before a resume)
  int64_t stepsThisRun = 0;     // optimizer steps done by this run
  int64_t epoch = 0;            // epoch the run stopped in (== epochs when all are done)
  float lastLoss = 0;           // mean loss over ranks of the last logged interval
  double samplesPerS = 0;       // all ranks' samples / wall time of this run's steps
  bool injectedFailure = false; // stopped by --fail-at-step
  bool resumed = false;         // started from a checkpoint
  int recoveries = 0;           // quorums this rank recovered into in place
  std::vector<float> params;    // final parameters (host copy)
};

// What a rank builds before it knows its rank and world size: its data mapped, its model and
// optimizer made, and the GEMM library's kernels warming up on a thread (they are built at their
// first use: ~50 ms of a fresh process's first step otherwise). `train` builds it on a thread of
// its own while the communicator connects, so a replacement process meets its waiting peers with
// its model ready.
struct PreparedTrainer;
// Any thread; the result goes to train() on the training thread (the warm-up runs on until done,
// on a throwaway model). CPU device only (a CUDA model belongs to the thread that made it:
// train() builds that one itself). Throws ConfigError (data, model, optimizer).
std::shared_ptr<PreparedTrainer> prepareTrainer(const TrainConfig& config);
// For a standby process (it waits with nothing else to do, and takes a peer's parameters once it
// has a rank): blocks until `prepared`'s warm-up thread ended, then runs one forward and backward
// of a batch on `prepared`'s own model, so that the activations and gradients a first step writes
// are in memory already; the gradients are zeroed again. Never throws (a failing batch is the
// first step's to report). `config` is the one `prepared` was made for; training thread.
void warmUpStandby(PreparedTrainer& prepared, const TrainConfig& config);

// Runs the whole training. `config` is checked (validateTrainConfig) and its device resolved
// (resolveDeviceAndBackend) by the caller; train checks neither again. `comm` may be null when
// worldSize is 1; `prepared` (prepareTrainer's, for this config) may be null. Blocks for the whole
// run.
// Throws ConfigError (config, data, checkpoint mismatch), CommError (a collective failed or a
// peer's parameters differ, and no recovery in place was possible), ddp::Error (checkpoint or
// metrics I/O).
TrainResult train(const TrainConfig& config, const RunContext& context, Communicator* comm,
                  std::shared_ptr<PreparedTrainer> prepared = nullptr);

}  // namespace ddp
