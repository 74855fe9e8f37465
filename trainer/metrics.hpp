// Metrics: what rank 0 reports about training.
//
//   JSON lines (`metrics` file, appended): one object per logged step,
//     {"step": 120, "epoch": 1, "loss": 0.4312, "lr": 0.001, "samples_per_s": 51234.5,
//      "world_size": 2, "generation": 0, "grad_norm": 0.83, "time": 1732890000.12}
//     loss is the mean over ranks and over the steps since the previous line; samples_per_s
//     counts all ranks' samples since the previous line. Each logged step has one line, also
//     when a recovery in place interrupted it (trainer.hpp); its loss is then the mean over the
//     ranks that still held it.
//     A full restart from a checkpoint redoes the steps after it, and writes their lines again.
//   TensorBoard (`tensorboard_dir`): scalars train/loss, train/lr, train/samples_per_s,
//     train/grad_norm at the same steps.
//   Console (stdout): one progress line every `progress_seconds`:
//     [train] epoch 1 step 120/500 loss 0.4312 lr 0.001 samples/s 51234 eta 7s
//   Status page (publishTo()): the logged steps as metric points
//     {"step": 120, "epoch": 1, "loss": 0.4312, "lr": 0.001, "samples_per_s": 51234.5,
//      "time": 1732890000.12}
//     handed to a publisher (train_main: the worker store, rendezvous/store/metric_points.hpp), at
//     most 5 a second (the last step's always; samples_per_s is then the mean over the logged
//     steps since the previous point); a publisher that throws is dropped after one warning,
//     training goes on.
//
// Thread safety: not thread-safe; owned by rank 0's training thread.
#pragma once

#include <chrono>
#include <cstdint>
#include <filesystem>
#include <fstream>
#include <functional>
#include <memory>
#include <string>

#include "trainer/tensorboard_writer.hpp"

namespace ddp {

struct StepMetrics {
  int64_t step = 0, epoch = 0, totalSteps = 0;
  float loss = 0, lr = 0, gradNorm = 0;
  double samplesPerS = 0;
  int worldSize = 1, generation = 0;
};

class MetricsSink {
 public:
  // Empty paths disable that output. Throws ddp::Error when a file cannot be opened.
  MetricsSink(const std::filesystem::path& jsonl, const std::filesystem::path& tensorboardDir,
              double progressSeconds);

  // Writes a JSON line and TensorBoard scalars, and publishes the point (see above); `last` = the
  // run's last step. A step at or before one already logged is not logged again (a step a
  // recovery in place finishes may have been logged before the failure). Does not throw on
  // write errors (logged once).
  void log(const StepMetrics& m, bool last = false);
  // This process takes rank 0 over from another process of the same job (a recovery in place):
  // steps up to the last one in the JSON lines file count as logged. Reads the file's tail.
  void skipLoggedSteps();
  // The last step logged (or found by skipLoggedSteps); -1 before any.
  int64_t lastLogged() const { return lastLogged_; }
  // Hands every logged point (a JSON object, without "n") to `publish` from now on. It runs on
  // the training thread and may block briefly (it is given a short store budget).
  void publishTo(std::function<void(const std::string& point)> publish);
  // Prints the progress line if progressSeconds passed since the last one (or `force`).
  void progress(const StepMetrics& m, bool force = false);

 private:
  std::filesystem::path jsonlPath_;
  std::ofstream jsonl_;
  int64_t lastLogged_ = -1;  // the last step logged (or found in the file by skipLoggedSteps)
  std::unique_ptr<TensorBoardWriter> tensorboard_;
  std::function<void(const std::string&)> publish_;
  std::chrono::steady_clock::time_point lastPublished_{};
  double rateSum_ = 0;  // samples_per_s of the logged steps not yet published
  int rates_ = 0;
  double progressSeconds_;
  std::chrono::steady_clock::time_point lastProgress_;
  std::chrono::steady_clock::time_point start_ = std::chrono::steady_clock::now();
  int64_t startStep_ = -1;
};

}  // namespace ddp
