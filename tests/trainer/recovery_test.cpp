// The trainer's recovery in place, with ranks as threads over real Gloo, a real worker store on
// loopback and a real quorum board; the test plays the agent (it publishes the quorums):
//   * a rank that fails is replaced by a new "process" (a fresh ElasticGroup + train()) that takes
//     its state from a peer; the others keep theirs; the run ends bit-identical to a fault-free one;
//   * a rank that leaves for good: the other two continue on world size 2 without rolling back;
//   * a rank added at a step boundary: the world grows to 3 and the newcomer takes the state;
//   * rank 0 fails after a logged step's loss was averaged, before it wrote the step's line, and
//     the others finished the step: its replacement writes the line (one line per step).
#include <catch2/catch.hpp>

#include <atomic>
#include <fstream>
#include <functional>
#include <memory>
#include <regex>
#include <thread>

#include "rendezvous/quorum/quorum_board.hpp"
#include "rendezvous/server/store_server.hpp"
#include "tests/trainer/test_support.hpp"
#include "trainer/make_data.hpp"
#include "trainer/trainer.hpp"
#include "worker_runtime/elastic_group.hpp"

using namespace ddp;
using namespace std::chrono_literals;

namespace {

std::string dataset() {
  static const std::string dir = [] {
    auto d = test::scratchDir("recovery-data");
    makeSyntheticData({d, 480, 8, 4, 3, 7});
    return d.string();
  }();
  return dir;
}

TrainConfig config(int64_t steps) {
  TrainConfig c;
  c.data = dataset();
  c.hidden = {16, 12};
  c.device = TrainDevice::kCpu;
  c.seed = 5;
  c.epochs = 50;
  c.maxSteps = steps;
  c.batchSize = 8;
  c.optimizer.type = "adamw";
  c.optimizer.lr = 0.01f;
  c.bucketMb = 0.0005;  // several buckets: the reducer's overlap path is exercised
  c.progressSeconds = 1e9;
  c.commTimeoutS = 30;
  return c;
}

// The agent's side: a worker store and a board with one slot per rank of at most 3.
struct Agent {
  StoreServerThread store{[] {
    StoreServerOptions o;
    o.host = "127.0.0.1";
    o.name = "worker-store (recovery test)";
    return o;
  }()};
  QuorumBoard board{3};

  // Publishes quorum (generation, quorum) of the ranks `members` (slot = rank), with `replaced`.
  void publish(int64_t generation, int64_t quorum, int world, std::vector<int> replaced = {}) {
    std::vector<std::pair<int, QuorumRecord>> records;
    for (int r = 0; r < world; ++r) {
      QuorumRecord q;
      q.id = {generation, quorum};
      q.rank = q.localRank = r;
      q.worldSize = q.localWorldSize = world;
      q.master.host = "127.0.0.1";
      q.master.port = store.port();
      q.replaced = replaced;
      q.reason = "test";
      records.emplace_back(r, q);
    }
    board.publish(records);
  }

  WorkerEnv env(int rank, int world) const {
    WorkerEnv e;
    e.rank = e.localRank = rank;
    e.worldSize = e.localWorldSize = world;
    e.master.host = "127.0.0.1";
    e.master.port = store.port();
    e.useAgentStore = true;
    e.quorumBoard = board.path();
    e.quorumSlot = rank;
    return e;
  }
};

CommOptions gloo() {
  CommOptions o;
  o.backend = CommBackend::kGloo;
  o.timeout = 30s;
  return o;
}

// One rank "process": its group and training, as train_main runs them.
TrainResult runRank(Agent& agent, int rank, int world, const TrainConfig& c, int64_t failAtStep,
                    int failRank, std::function<void(int64_t)> onStep = {}) {
  ElasticGroup group(agent.env(rank, world), gloo());
  RunContext ctx{group.view().rank, group.view().worldSize, rank, int(group.view().id.generation),
                 failAtStep, failRank, -1, -1,
                 [onStep = std::move(onStep)](int64_t step, double) { if (onStep) onStep(step); }};
  ctx.localWorldSize = group.view().localWorldSize;
  ctx.group = &group;
  ctx.replacement = group.joinedLate();
  return train(c, ctx, &group.comm());
}

std::vector<float> faultFree(int world, const TrainConfig& c) {
  Agent agent;
  agent.publish(0, 0, world);
  std::vector<TrainResult> results(world);
  std::vector<std::thread> ranks;
  for (int r = 0; r < world; ++r) {
    ranks.emplace_back([&, r] { results[r] = runRank(agent, r, world, c, -1, -1); });
  }
  for (auto& t : ranks) t.join();
  for (int r = 1; r < world; ++r) REQUIRE(results[r].params == results[0].params);
  return results[0].params;
}

// Runs body(rank) on one thread per rank, turning an escaped exception into a test failure.
void onThreads(int n, const std::function<void(int)>& body) {
  std::vector<std::string> errors(n);
  std::vector<std::thread> ranks;
  for (int r = 0; r < n; ++r) {
    ranks.emplace_back([&, r] {
      try {
        body(r);
      } catch (const std::exception& e) {
        errors[r] = e.what();
      }
    });
  }
  for (auto& t : ranks) t.join();
  for (int r = 0; r < n; ++r) {
    INFO("rank " << r);
    CHECK(errors[r] == "");
  }
}

}  // namespace

TEST_CASE("a failed rank is replaced from a peer's state and the run ends bit-identical",
          "[recovery]") {
  const TrainConfig c = config(40);
  const std::vector<float> reference = faultFree(3, c);

  Agent agent;
  agent.publish(0, 0, 3);
  std::vector<TrainResult> results(3);
  onThreads(3, [&](int r) {
    if (r != 2) {
      results[r] = runRank(agent, r, 3, c, -1, -1);
      return;
    }
    TrainResult first = runRank(agent, 2, 3, c, 17, 2);  // stops at step 17, its group closes
    REQUIRE(first.injectedFailure);
    agent.publish(0, 1, 3, {2});                       // its agent: quorum 1, rank 2 replaced
    results[2] = runRank(agent, 2, 3, c, 17, 2);       // the replacement process
  });
  for (int r = 0; r < 3; ++r) {
    INFO("rank " << r);
    CHECK(results[r].steps == 40);
    CHECK(results[r].params == reference);
  }
  CHECK(results[0].recoveries == 1);
  CHECK(results[1].recoveries == 1);
  CHECK_FALSE(results[2].resumed);  // the replacement read no checkpoint: its state came from a peer
}

TEST_CASE("a rank lost for good: the others go on with world size 2 from where they were",
          "[recovery]") {
  const TrainConfig c = config(30);
  Agent agent;
  agent.publish(0, 0, 3);
  std::vector<TrainResult> results(3);
  onThreads(3, [&](int r) {
    if (r == 2) {
      results[2] = runRank(agent, 2, 3, c, 11, 2);
      agent.publish(1, 0, 2);  // the next generation, in place: ranks 0 and 1 only
      return;
    }
    results[r] = runRank(agent, r, 3, c, -1, -1);
  });
  CHECK(results[2].injectedFailure);
  for (int r = 0; r < 2; ++r) {
    INFO("rank " << r);
    CHECK(results[r].steps == 30);
    CHECK(results[r].stepsThisRun == 30);  // no step redone from a checkpoint: no rollback
    CHECK(results[r].recoveries == 1);
  }
  CHECK(results[0].params == results[1].params);
}

TEST_CASE("a rank added at a step boundary takes the state and the world grows to 3",
          "[recovery]") {
  const TrainConfig c = config(400);
  Agent agent;
  agent.publish(0, 0, 2);
  std::atomic<bool> grown{false};
  std::atomic<int64_t> stepsSeen{0};
  std::vector<TrainResult> results(3);
  onThreads(3, [&](int r) {
    if (r < 2) {
      results[r] = runRank(agent, r, 2, c, -1, -1, [&](int64_t step) { stepsSeen = step; });
      return;
    }
    while (stepsSeen.load() < 5) std::this_thread::yield();  // the job of two is under way
    // The newcomer's agent joined: generation 1 with world size 3, rank 2 new.
    agent.publish(1, 0, 3, {2});
    grown = true;
    results[2] = runRank(agent, 2, 3, c, -1, -1);
  });
  REQUIRE(grown);
  for (int r = 0; r < 3; ++r) {
    INFO("rank " << r);
    CHECK(results[r].steps == 400);
    CHECK(results[r].params == results[0].params);
  }
  CHECK(results[0].recoveries == 1);
  CHECK(results[2].recoveries == 0);
}

TEST_CASE("rank 0 lost before a finished step's metrics line: its replacement writes the line",
          "[recovery]") {
  TrainConfig c = config(30);
  c.logEvery = 1;
  const auto dir = test::scratchDir("recovery-metrics");
  c.metrics = (dir / "metrics.jsonl").string();
  constexpr int64_t kStep = 12;
  Agent agent;
  agent.publish(0, 0, 3);
  std::atomic<int> finishedStep{0};  // survivors that finished step kStep (its loss averaged)
  std::vector<TrainResult> results(3);
  onThreads(3, [&](int r) {
    if (r != 0) {
      results[r] = runRank(agent, r, 3, c, -1, -1, [&](int64_t step) {
        if (step == kStep) ++finishedStep;
      });
      return;
    }
    {
      // Rank 0's first process: the step's loss averaged, then gone before its line. Its
      // connections close once both peers finished the step, so that they hold it whole.
      ElasticGroup group(agent.env(0, 3), gloo());
      RunContext ctx{0, 3, 0, 0, kStep, 0, -1, -1, {}};
      ctx.localWorldSize = 3;
      ctx.group = &group;
      ctx.failBeforeMetricsLine = true;
      REQUIRE(train(c, ctx, &group.comm()).injectedFailure);
      while (finishedStep.load() < 2) std::this_thread::yield();
    }
    agent.publish(0, 1, 3, {0});  // its agent: quorum 1, rank 0 replaced
    results[0] = runRank(agent, 0, 3, c, -1, -1);
  });
  std::ifstream in(c.metrics);
  std::vector<int64_t> steps;
  const std::regex stepField("\"step\":([0-9]+)");
  for (std::string line; std::getline(in, line);) {
    std::smatch m;
    if (std::regex_search(line, m, stepField)) steps.push_back(std::stoll(m[1]));
  }
  std::vector<int64_t> want;
  for (int64_t s = 1; s <= 30; ++s) want.push_back(s);
  CHECK(steps == want);  // step kStep's line once, from the replacement; no step twice
  CHECK(results[0].steps == 30);
}
