// The cost of progress beats (worker_runtime/progress.hpp) at short steps: a "training loop" of
// fixed work per step (arithmetic calibrated to about --step-us microseconds, not a clock spin, so
// any overhead shows as more wall time for the same work), run in alternating blocks with and
// without reportProgress(step, computeSeconds) after each step — the with-beats blocks also read
// the clock twice per step, as `train` does to measure compute time. Blocks are short and come in
// adjacent pairs, so that a machine's changing load falls on both kinds alike; the figure is the
// median of the pairs' ratios. Then the direct cost: a loop of nothing but reportProgress calls
// (with their clock reads), in ns per call, beats to the FIFO included. Run it under ddprun with
// --straggler-threshold (scripts/bench/beats.sh) so that beats reach a real agent's FIFO;
// without DDP_PROGRESS_FILE the beats are no-ops and the ratio shows only the call itself.
#include <CLI/CLI.hpp>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <vector>

#include "worker_runtime/progress.hpp"

namespace {

using Clock = std::chrono::steady_clock;

volatile double sink = 0;

// About `iterations` dependent multiply-adds: work the compiler cannot drop or vectorise away.
void work(long iterations) {
  double x = sink + 1.0;
  for (long i = 0; i < iterations; ++i) x = x * 1.0000001 + 1e-9;
  sink = x;
}

long calibrate(double stepUs) {
  long iterations = 1000;
  while (true) {
    const auto t0 = Clock::now();
    work(iterations);
    const double us = std::chrono::duration<double, std::micro>(Clock::now() - t0).count();
    if (us > 20000) return long(double(iterations) * stepUs / us);
    iterations *= 2;
  }
}

double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v[v.size() / 2];
}

}  // namespace

int main(int argc, char** argv) {
  CLI::App app{"beats_bench: the cost of worker_runtime's progress beats at short steps"};
  double stepUs = 1000;
  int steps = 200, blocks = 100;
  bool verbose = false;
  app.add_option("--step-us", stepUs, "work per step, microseconds (default 1000)");
  app.add_option("--steps", steps, "steps per block (default 200)");
  app.add_option("--blocks", blocks, "blocks of each kind, alternating (default 100)");
  app.add_flag("--verbose", verbose, "print every block");
  CLI11_PARSE(app, argc, argv);
  const long iterations = calibrate(stepUs);
  const bool fifo = std::getenv("DDP_PROGRESS_FILE") != nullptr;
  std::printf("beats_bench: %d blocks x %d steps of ~%.0f us each kind; beats %s\n", blocks, steps,
              stepUs, fifo ? "go to the agent's FIFO" : "are no-ops (no DDP_PROGRESS_FILE)");
  std::vector<double> with, without, ratios;
  int64_t step = 0;
  for (int b = 0; b < 2 * blocks; ++b) {
    const bool beats = b % 2 == 1;  // without first: the warm-up favours neither kind
    const auto t0 = Clock::now();
    for (int i = 0; i < steps; ++i) {
      if (beats) {
        const auto s = Clock::now();
        work(iterations);
        ddp::reportProgress(++step, std::chrono::duration<double>(Clock::now() - s).count());
      } else {
        work(iterations);
      }
    }
    const double us = std::chrono::duration<double, std::micro>(Clock::now() - t0).count() / steps;
    (beats ? with : without).push_back(us);
    if (beats) ratios.push_back(us / without.back());
    if (verbose) std::printf("block %3d %-13s %8.2f us/step\n", b, beats ? "with beats" : "without beats", us);
  }
  const double a = median(without), c = median(with), r = median(ratios);
  std::printf("median block: without %.2f us/step, with %.2f us/step\n", a, c);
  std::printf("median ratio of %zu adjacent pairs (with / without): %.4f (overhead %+.2f%%)\n",
              ratios.size(), r, (r - 1) * 100);
  // The direct cost: calls only.
  const int calls = 2000000;
  const auto t0 = Clock::now();
  for (int i = 0; i < calls; ++i) {
    const auto s = Clock::now();
    ddp::reportProgress(++step, std::chrono::duration<double>(Clock::now() - s).count());
  }
  const double ns = std::chrono::duration<double, std::nano>(Clock::now() - t0).count() / calls;
  std::printf("direct cost: %.1f ns per step (2 clock reads + reportProgress, beats included) = "
              "%.4f%% of a %.0f us step\n", ns, ns / (stepUs * 1000) * 100, stepUs);
  return 0;
}
