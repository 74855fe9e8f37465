// HungWorkers with a real WorkerGroup and real worker processes (ddp_test_worker, native): a hung
// worker's gdb stacks land in stacks.txt and in its failure before it is ended; destroyed while gdb
// still takes them, it kills gdb and ends the worker, which is not left frozen.
#include "launcher/hang/hung_workers.hpp"

#include <signal.h>
#include <sys/wait.h>

#include <boost/asio/steady_timer.hpp>
#include <catch2/catch.hpp>
#include <chrono>
#include <filesystem>
#include <optional>

#include "launcher/workers/log_layout.hpp"
#include "launcher/workers/worker_env_builder.hpp"
#include "launcher_test_util.hpp"
#include "rendezvous/server/store_server.hpp"
#include "tests/loopback_store.hpp"

namespace ddp {
namespace {

using namespace std::chrono_literals;

// One sleeping worker in a group of its own, with the reaper and the loop it needs.
struct Fixture {
  explicit Fixture(const std::string& name)
      : dir(test::scratchDir(name)), logs(dir + "/logs", "run", true),
        workerStore(testing::loopbackStore("worker store (test)")), reaper(io) {
    config.nprocPerNode = 1;
    config.command = {test::workerBin(), "--sleep-ms", "60000", "--ready-file", dir + "/ready"};
    settings.host = "testhost";
    settings.shutdownTimeout = 10s;
    WorkerEnvBuilder builder(config, "run", currentEnvironment());
    RendezvousResult round;
    round.worldSize = round.roleWorldSize = 1;
    std::vector<WorkerSpec> specs{
        builder.build(0, round, {"127.0.0.1", workerStore.port()}, logs.errorFilePath(0, 0))};
    group.emplace(io, reaper, settings, logs, 0);
    group->start(std::move(specs), [this](int localRank) {
      if (hung) hung->onExit(localRank);
      exited = true;
    });
    REQUIRE(test::waitForFiles({dir + "/ready.0"}));
    hung.emplace(io, reaper, *group, 20s);
  }
  ~Fixture() {
    hung.reset();
    group.reset();
  }

  // Runs the loop until the worker exited or `budget` passed; true when it exited.
  bool runUntilExit(std::chrono::milliseconds budget) {
    boost::asio::steady_timer deadline(io, budget);
    bool late = false;
    deadline.async_wait([&](const boost::system::error_code& ec) { late = !ec; });
    while (!exited && !late) io.run_one();
    return exited;
  }

  pid_t pid() const { return group->watched().front().pid; }

  std::string dir;
  LogLayout logs;
  StoreServerThread workerStore;
  LaunchConfig config;
  GroupSettings settings;
  boost::asio::io_context io;
  ChildReaper reaper;
  std::optional<WorkerGroup> group;
  std::optional<HungWorkers> hung;
  bool exited = false;
};

}  // namespace

TEST_CASE("a hung worker's stacks are taken, then it is ended; its failure shows them",
          "[hang]") {
  Fixture fx("hung_native");
  const pid_t pid = fx.pid();
  fx.hung->take(HangVerdict{0, pid, 0, "no progress for 3.0 s (test)"});
  REQUIRE(fx.runUntilExit(60s));
  const auto failures = fx.group->failures();
  REQUIRE(failures.size() == 1);
  const WorkerFailure& f = failures.front();
  CHECK(f.hang == "no progress for 3.0 s (test)");
  CHECK(f.signal == SIGKILL);
  CHECK_FALSE(f.stoppedByAgent);
  CHECK(f.stacks.find("Thread 1 ") != std::string::npos);  // gdb's, cleaned (stack_text.hpp)
  REQUIRE_FALSE(f.stacksFile.empty());
  const std::string whole = test::readFile(f.stacksFile);
  CHECK(whole.rfind("# no progress for 3.0 s (test)\n", 0) == 0);
  CHECK(f.stacksFile == fx.logs.workerDir(0, 0) + "/stacks.txt");
}

TEST_CASE("destroyed while gdb takes the stacks, it ends the worker, which is not left frozen",
          "[hang]") {
  Fixture fx("hung_destroyed");
  const pid_t pid = fx.pid();
  fx.hung->take(HangVerdict{0, pid, 0, "no progress (test)"});
  // Frozen for gdb at once; gdb is still starting (it reads symbols for a while).
  fx.hung.reset();
  REQUIRE(fx.runUntilExit(10s));
  const auto failures = fx.group->failures();
  REQUIRE(failures.size() == 1);
  CHECK(failures.front().signal == SIGKILL);
  CHECK(failures.front().hang == "no progress (test)");
  CHECK(failures.front().stacks.empty());  // none taken: the take was cut short
}

TEST_CASE("a worker already marked hung or exited is not taken again", "[hang]") {
  Fixture fx("hung_twice");
  const pid_t pid = fx.pid();
  CHECK(fx.group->markHung(HangVerdict{0, pid, 0, "first"}));
  CHECK_FALSE(fx.group->markHung(HangVerdict{0, pid, 0, "second"}));
  fx.group->endHung(0);
  REQUIRE(fx.runUntilExit(10s));
  CHECK_FALSE(fx.group->markHung(HangVerdict{0, pid, 0, "after the exit"}));
  REQUIRE(fx.group->failures().size() == 1);
  CHECK(fx.group->failures().front().hang == "first");
}

}  // namespace ddp
