// allreduce_bench: float32 allreduce bandwidth through our Communicator (GlooCommunicator) vs
// calling gloo::allreduce directly on the same Gloo context (same TCP pairs), 2+ ranks as threads
// of one process over an InMemoryStore, loopback transport.
//
// For each size (powers of two from --min-kib to --max-mib), each of --reps repetitions times
// `iters` back-to-back allreduces with each method, alternating which method goes first so that
// neither always runs on a warmer cache/socket; the median per-op time of each method is reported,
// and the ratio is the median over repetitions of (direct time / our time) within one repetition
// (pairs measured back to back, so slow drifts of a busy machine cancel).
// Bandwidth is algorithm bandwidth: bytes of the buffer / time per allreduce. Buffers hold zeros
// (sums stay zero, no denormal or overflow slow paths). Prints a markdown table with the ratio
// ours / direct Gloo (goal >= 95%).
//
// Thread safety: each rank thread owns its communicator and buffer; ranks meet only through
// collectives. Not a test: driven by scripts/bench/allreduce_vs_gloo.sh.
#include <gloo/allreduce.h>
#include <gloo/context.h>
#include <gloo/math.h>

#include <CLI/CLI.hpp>
#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <exception>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "rendezvous/store/in_memory_store.hpp"
#include "worker_runtime/gloo_communicator.hpp"
#include "worker_runtime/worker_env.hpp"

namespace {

using Clock = std::chrono::steady_clock;

struct Options {
  int ranks = 2;
  int reps = 11;
  std::size_t minBytes = 4 << 10;
  std::size_t maxBytes = 64 << 20;
};

struct Row {
  std::size_t bytes = 0;
  int iters = 0;
  double oursSeconds = 0;   // median seconds per allreduce
  double glooSeconds = 0;
  double ratio = 0;         // median over reps of (direct time / our time) within the same rep
};

// Enough back-to-back ops that each timed block moves ~128 MiB (at least 3, at most 250 ops).
int itersFor(std::size_t bytes) {
  const std::size_t target = std::size_t{128} << 20;
  return static_cast<int>(std::clamp<std::size_t>(target / bytes, 3, 250));
}

double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v[v.size() / 2];
}

class RankBench {
 public:
  RankBench(int rank, const Options& opt, ddp::Store& store) : opt_(opt) {
    ddp::WorkerEnv env;
    env.rank = env.localRank = rank;
    env.worldSize = env.localWorldSize = opt.ranks;
    env.master.host = "127.0.0.1";
    env.master.port = 29500;  // not dialled: the store is in memory
    ddp::CommOptions co;
    co.backend = ddp::CommBackend::kGloo;
    co.bindAddress = "127.0.0.1";
    co.timeout = std::chrono::seconds(120);
    comm_ = std::make_unique<ddp::GlooCommunicator>(env, store, co);
    buf_.assign(opt.maxBytes / sizeof(float), 0.0f);
  }

  // Every rank runs the same schedule; only rank 0's timings are kept.
  std::vector<Row> run() {
    std::vector<Row> rows;
    for (std::size_t bytes = opt_.minBytes; bytes <= opt_.maxBytes; bytes *= 2) {
      rows.push_back(measure(bytes));
    }
    return rows;
  }

 private:
  Row measure(std::size_t bytes) {
    const std::size_t count = bytes / sizeof(float);
    gloo::AllreduceOptions direct(comm_->glooContext());
    direct.setOutput(buf_.data(), count);
    direct.setReduceFunction(
        static_cast<void (*)(void*, const void*, const void*, size_t)>(&gloo::sum<float>));
    direct.setTimeout(comm_->timeout());
    Row row{bytes, itersFor(bytes), 0, 0};
    auto ours = [&] { comm_->allreduce(buf_.data(), count, ddp::DataType::kFloat32,
                                       ddp::ReduceOp::kSum); };
    auto gloo = [&] {
      direct.setTag(directTag_++);
      gloo::allreduce(direct);
    };
    ours();  // warm-up: connections, caches, the communicator's cached options
    gloo();
    std::vector<double> oursT, glooT;
    for (int r = 0; r < opt_.reps; ++r) {
      if (r % 2 == 0) {
        oursT.push_back(timeBlock(ours, row.iters));
        glooT.push_back(timeBlock(gloo, row.iters));
      } else {
        glooT.push_back(timeBlock(gloo, row.iters));
        oursT.push_back(timeBlock(ours, row.iters));
      }
    }
    row.oursSeconds = median(oursT);
    row.glooSeconds = median(glooT);
    std::vector<double> ratios;
    for (int r = 0; r < opt_.reps; ++r) ratios.push_back(glooT[r] / oursT[r]);
    row.ratio = median(ratios);
    return row;
  }

  template <typename Fn>
  double timeBlock(Fn&& op, int iters) {
    comm_->barrier();  // start together
    const auto t0 = Clock::now();
    for (int i = 0; i < iters; ++i) op();
    return std::chrono::duration<double>(Clock::now() - t0).count() / iters;
  }

  const Options& opt_;
  std::unique_ptr<ddp::GlooCommunicator> comm_;
  std::vector<float> buf_;
  uint32_t directTag_ = 1u << 30;  // far from the communicator's own tags
};

std::string human(std::size_t bytes) {
  if (bytes >= (1u << 20)) return std::to_string(bytes >> 20) + " MiB";
  return std::to_string(bytes >> 10) + " KiB";
}

void printTable(const Options& opt, const std::vector<Row>& rows) {
  std::printf("allreduce float32, %d ranks (threads, loopback TCP), median of %d reps, %u CPUs\n\n",
              opt.ranks, opt.reps, std::thread::hardware_concurrency());
  std::printf("| size | ops/rep | Communicator GB/s | gloo::allreduce GB/s | ratio, median of pairs (goal >= 95%%) |\n");
  std::printf("|---|---|---|---|---|\n");
  double logSum = 0;
  for (const auto& r : rows) {
    const double ours = static_cast<double>(r.bytes) / r.oursSeconds / 1e9;
    const double gloo = static_cast<double>(r.bytes) / r.glooSeconds / 1e9;
    logSum += std::log(r.ratio);
    std::printf("| %s | %d | %.3f | %.3f | %.1f%% |\n", human(r.bytes).c_str(), r.iters, ours, gloo,
                100.0 * r.ratio);
  }
  std::printf("\ngeometric mean ratio: %.1f%%\n",
              100.0 * std::exp(logSum / static_cast<double>(rows.size())));
}

}  // namespace

int main(int argc, char** argv) {
  Options opt;
  std::size_t minKib = 4, maxMib = 64;
  CLI::App app{"allreduce bandwidth: ddp::GlooCommunicator vs gloo::allreduce on the same context"};
  app.add_option("--ranks", opt.ranks, "ranks (threads)")->check(CLI::Range(2, 16));
  app.add_option("--reps", opt.reps, "repetitions per size (median)")->check(CLI::Range(1, 101));
  app.add_option("--min-kib", minKib, "smallest size, KiB")->check(CLI::Range(1, 1 << 20));
  app.add_option("--max-mib", maxMib, "largest size, MiB")->check(CLI::Range(1, 1024));
  CLI11_PARSE(app, argc, argv);
  opt.minBytes = minKib << 10;
  opt.maxBytes = maxMib << 20;
  if (opt.minBytes > opt.maxBytes) {
    std::fprintf(stderr, "allreduce_bench: --min-kib %zu exceeds --max-mib %zu\n", minKib, maxMib);
    return 2;
  }

  ddp::InMemoryStore store(std::chrono::seconds(60));
  std::vector<Row> rows;
  std::exception_ptr failure;
  std::mutex mu;
  std::vector<std::thread> threads;
  for (int rank = 0; rank < opt.ranks; ++rank) {
    threads.emplace_back([&, rank] {
      try {
        RankBench bench(rank, opt, store);
        auto result = bench.run();
        if (rank == 0) rows = std::move(result);
      } catch (...) {
        std::lock_guard lock(mu);
        if (!failure) failure = std::current_exception();
      }
    });
  }
  for (auto& t : threads) t.join();
  if (failure) {
    try {
      std::rethrow_exception(failure);
    } catch (const std::exception& e) {
      std::fprintf(stderr, "allreduce_bench failed: %s\n", e.what());
    }
    return 1;
  }
  printTable(opt, rows);
  return 0;
}
