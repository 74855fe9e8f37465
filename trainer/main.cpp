// train: the reference data-parallel worker (see trainer/train_main.hpp for usage).
#include <CLI/CLI.hpp>

#include "rendezvous/base/build_info.hpp"
#include "trainer/train_main.hpp"
#include "worker_runtime/worker_main.hpp"

namespace {

int parseAndRun(int argc, char** argv) {
  CLI::App app{"train: data-parallel MLP training over sharded data (CPU: Gloo + OpenBLAS, "
               "GPU: NCCL + cuBLAS)"};
  ddp::TrainOptions train;
  app.add_option("--config", train.config, "JSON config file (its keys: docs/trainer.md, \"Config keys\")");
  app.add_option("--data", train.data, "dataset directory (overrides config 'data')");
  app.add_option("--checkpoint-dir", train.checkpointDir, "checkpoint directory");
  app.add_option("--metrics", train.metrics, "JSON-lines metrics file (rank 0 appends)");
  app.add_option("--tensorboard-dir", train.tensorboardDir,
                 "TensorBoard event files (rank 0; overrides config 'tensorboard_dir')");
  app.add_option("--max-steps", train.maxSteps, "stop after this many optimizer steps");
  app.add_option("--backend", train.backend, "auto | gloo | nccl")
      ->check(CLI::IsMember({"auto", "gloo", "nccl"}));
  app.add_option("--fail-at-step", train.failAtStep,
                 "fault injection: exit non-zero after this many steps (generation 0 only)");
  app.add_option("--fail-rank", train.failRank, "rank that --fail-at-step applies to");
  app.add_option("--fail-generations", train.failGenerations,
                 "--fail-at-step fires in generations 0 .. N-1 (default 1: generation 0 only)")
      ->check(CLI::PositiveNumber);
  app.add_option("--hang-at-step", train.hangAtStep,
                 "fault injection: sleep for good inside the step after this many (generation 0 "
                 "only; tests of ddprun --hang-timeout)");
  app.add_option("--hang-rank", train.hangRank, "rank that --hang-at-step applies to");
  app.add_option("--slow-rank", train.slowRank,
                 "fault injection: this rank sleeps --slow-ms in every step, counted as its compute "
                 "time (tests of ddprun --straggler-threshold)");
  app.add_option("--slow-ms", train.slowMs, "milliseconds --slow-rank sleeps per step")
      ->check(CLI::NonNegativeNumber);
  app.add_option("--log-level", train.logLevel, "trace|debug|info|warn|error (default $DDP_LOG_LEVEL or info)");

  ddp::MakeDataOptions data;
  std::string out;
  auto* make = app.add_subcommand("make-data", "write a synthetic classification dataset");
  make->add_option("--out", out, "output directory")->required();
  make->add_option("--samples", data.samples, "number of samples")->required();
  make->add_option("--features", data.features, "features per sample")->required();
  make->add_option("--classes", data.classes, "number of classes")->required();
  make->add_option("--shards", data.shards, "number of shard files")->required();
  make->add_option("--seed", data.seed, "seed of the teacher network and the features");
  app.require_subcommand(0, 1);
  std::string version = ddp::versionText("train");
  version.pop_back();  // CLI11 prints its own newline
  app.set_version_flag("--version", version);
  try {
    app.parse(argc, argv);
    if (!make->parsed() && train.config.empty()) {
      throw CLI::RequiredError("--config (or the make-data subcommand)");
    }
  } catch (const CLI::ParseError& e) {
    return app.exit(e) == 0 ? 0 : ddp::kExitConfigError;
  }
  if (make->parsed()) {
    data.out = out;
    return ddp::runMakeData(data);
  }
  return ddp::runTrain(train);
}

}  // namespace

int main(int argc, char** argv) { return ddp::runWorkerMain(argc, argv, parseAndRun); }
