// The `train` binary: options and entry point (main.cpp only parses flags into these).
//
//   train make-data --out DIR --samples N --features F --classes C --shards K [--seed S]
//   train --config FILE [--data DIR] [--checkpoint-dir DIR] [--metrics FILE]
//         [--tensorboard-dir DIR] [--max-steps N] [--backend auto|gloo|nccl] [--fail-at-step N --fail-rank R]
//         [--fail-generations G] [--hang-at-step N --hang-rank R]
//         [--slow-rank R --slow-ms MS] [--log-level LEVEL]
//
// With the torchrun env contract (RANK set) the worker connects to the worker store and builds a
// communicator; without it, it trains as a single process (world size 1).
//
// Thread safety: call once from main().
#pragma once

#include <cstdint>
#include <optional>
#include <string>

#include "trainer/make_data.hpp"

namespace ddp {

struct TrainOptions {
  std::string config;                        // --config FILE
  std::optional<std::string> data;           // --data: overrides config "data"
  std::optional<std::string> checkpointDir;  // --checkpoint-dir
  std::optional<std::string> metrics;        // --metrics
  std::optional<std::string> tensorboardDir;  // --tensorboard-dir
  std::optional<int64_t> maxSteps;           // --max-steps
  std::optional<std::string> backend;        // --backend
  int64_t failAtStep = -1;                   // --fail-at-step (generation 0 only)
  int failRank = 0;                          // --fail-rank
  int failGenerations = 1;                   // --fail-generations (--fail-at-step in 0..N-1)
  int64_t hangAtStep = -1;                   // --hang-at-step (generation 0 only)
  int hangRank = 0;                          // --hang-rank
  int slowRank = -1;                         // --slow-rank (every generation; -1: none)
  int slowMs = 0;                            // --slow-ms: its extra compute per step
  std::string logLevel;                      // --log-level ("" = $DDP_LOG_LEVEL or info)
};

// Runs `train --config ...`. Returns the exit code; throws what train() throws, and ddp::Error
// for an injected failure (so the error file names it).
int runTrain(const TrainOptions& options);

// Runs `train make-data ...`; prints a one-line summary to stdout. Throws ConfigError.
int runMakeData(const MakeDataOptions& options);

}  // namespace ddp
