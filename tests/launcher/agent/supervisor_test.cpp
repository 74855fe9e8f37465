// The Supervisor and WorkerGroup with real worker processes (ddp_test_worker): success, failure
// and teardown of the rest, signals to workers and to the agent, the shutdown grace, log routing.
#include "launcher/agent/supervisor.hpp"

#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <catch2/catch.hpp>
#include <chrono>
#include <thread>

#include "launcher/workers/log_layout.hpp"
#include "launcher/workers/worker_process.hpp"
#include "launcher_test_util.hpp"
#include "rendezvous/server/store_server.hpp"
#include "tests/loopback_store.hpp"

namespace ddp {
namespace {

using namespace std::chrono_literals;

struct Fixture {
  explicit Fixture(const std::string& name, int n)
      : dir(test::scratchDir(name)), logs(dir + "/logs", "run", true),
        workerStore(testing::loopbackStore("worker store (test)")) {
    config.nprocPerNode = n;
    consolePath = dir + "/console.txt";
    console = ::open(consolePath.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
    settings.host = "testhost";
    settings.consoleOut = console;
    settings.consoleErr = console;
    settings.shutdownTimeout = 10s;
  }
  ~Fixture() { ::close(console); }

  std::vector<WorkerSpec> specs(const std::vector<std::string>& args, int64_t generation = 0) {
    config.command = {test::workerBin()};
    config.command.insert(config.command.end(), args.begin(), args.end());
    WorkerEnvBuilder builder(config, "run", currentEnvironment());
    RendezvousResult round;
    round.generation = generation;
    round.worldSize = round.roleWorldSize = config.nprocPerNode;
    std::vector<WorkerSpec> out;
    for (int lr = 0; lr < config.nprocPerNode; ++lr) {
      out.push_back(builder.build(lr, round, {"127.0.0.1", workerStore.port()},
                                  logs.errorFilePath(generation, lr)));
    }
    return out;
  }

  std::vector<std::string> perRank(const std::string& base) const {
    std::vector<std::string> out;
    for (int r = 0; r < config.nprocPerNode; ++r) out.push_back(base + "." + std::to_string(r));
    return out;
  }

  std::string dir;
  LogLayout logs;
  // The generation's worker store (MASTER_ADDR:MASTER_PORT): the agent numbers failures in it.
  StoreServerThread workerStore;
  LaunchConfig config;
  GroupSettings settings;
  std::string consolePath;
  int console = -1;
};

// Sends `signal` to this process once every file exists (the workers are ready).
std::thread signalWhenReady(const std::vector<std::string>& files, int signal) {
  return std::thread([files, signal] {
    if (test::waitForFiles(files)) ::kill(::getpid(), signal);
  });
}

}  // namespace

TEST_CASE("all workers exiting 0 is success, with whole prefixed console lines", "[supervisor]") {
  Fixture fx("success", 3);
  Supervisor sup(fx.settings, {});
  auto outcome = sup.runGeneration(fx.specs({"--print", "50"}), fx.logs, 0);
  CHECK(outcome.kind == OutcomeKind::kSucceeded);
  CHECK(outcome.failures.empty());
  const auto lines = test::lines(test::readFile(fx.consolePath));
  CHECK(lines.size() == 3 * 50 * 2);
  for (const auto& line : lines) {
    INFO(line);
    const bool wellFormed =
        (line.rfind("[default", 0) == 0) &&
        (line.find("]:out ") != std::string::npos || line.find("]:err ") != std::string::npos);
    CHECK(wellFormed);
  }
  CHECK(std::count(lines.begin(), lines.end(), "[default2]:out 2 line 49") == 1);
}

TEST_CASE("one failure stops the rest and is the root cause", "[supervisor]") {
  Fixture fx("failure", 3);
  Supervisor sup(fx.settings, {});
  const std::string sig = fx.dir + "/sig";
  auto outcome = sup.runGeneration(fx.specs({"--fail-rank", "1", "--exit", "3", "--error-message",
                                             "boom", "--wait", "--signal-file", sig}),
                                   fx.logs, 0);
  REQUIRE(outcome.kind == OutcomeKind::kFailed);
  REQUIRE(outcome.failures.size() == 3);
  const auto& root = outcome.failures.front();
  CHECK(root.rank == 1);
  CHECK(root.exitCode == 3);
  CHECK_FALSE(root.stoppedByAgent);
  CHECK(root.message == "RuntimeError: boom");
  CHECK(root.traceback.find("line 2") != std::string::npos);
  REQUIRE_FALSE(root.stderrTail.empty());
  CHECK(root.stderrTail.back() == "rank 1 failing at attempt 0");
  for (std::size_t i = 1; i < outcome.failures.size(); ++i) {
    const auto& peer = outcome.failures[i];
    CHECK(peer.stoppedByAgent);
    // Killed by the forwarded SIGTERM, or handled it and exited 128+15.
    CHECK((peer.signal == SIGTERM || peer.exitCode == 128 + SIGTERM));
  }
  const auto summary = summarize({FailureRecord{0, 0, "testhost", outcome.failures}});
  CHECK(summary.rootCause.rank == 1);
  CHECK(ddprunExitCode(summary.rootCause) == 3);
  CHECK(root.failureSeq == 1);  // numbered by the agent from the worker store's counter
  CHECK_FALSE(root.seqByWorker);
}

// Blocks the supervisor's event loop while both workers fail at the same moment, so their exits
// are reaped together: what the root cause is must not depend on which exit is handled first.
TEST_CASE("simultaneous exits: the own failure is the root cause, 50 times out of 50",
          "[supervisor]") {
  Fixture fx("simultaneous", 2);
  Supervisor sup(fx.settings, {});
  for (int64_t generation = 0; generation < 50; ++generation) {
    INFO("generation " << generation);
    const std::string ready = fx.dir + "/ready" + std::to_string(generation);
    // Rank 0 fails like a victim (exit 3, "Connection reset by peer"), rank 1 on its own.
    std::thread release([&] {
      REQUIRE(test::waitForFiles(fx.perRank(ready)));
      std::vector<pid_t> pids;
      for (const auto& f : fx.perRank(ready)) pids.push_back(std::stoi(test::readFile(f)));
      boost::asio::post(sup.io(), [pids] {
        for (pid_t pid : pids) ::kill(pid, SIGUSR2);
        // Both have exited before the loop can see either exit. The workers are their guardians'
        // children, not ours: wait on a pidfd (readable once the process exited).
        for (pid_t pid : pids) {
          const int fd = static_cast<int>(::syscall(SYS_pidfd_open, pid, 0));
          if (fd < 0) continue;  // already gone
          pollfd p{fd, POLLIN, 0};
          while (::poll(&p, 1, -1) < 0 && errno == EINTR) {
          }
          ::close(fd);
        }
      });
    });
    auto outcome = sup.runGeneration(
        fx.specs({"--wait", "--fail-on-signal", "--ready-file", ready, "--exit", "1",
                  "--error-message", "boom", "--comm-error-rank", "0"},
                 generation),
        fx.logs, generation);
    release.join();
    REQUIRE(outcome.kind == OutcomeKind::kFailed);
    REQUIRE(outcome.failures.size() == 2);
    for (const auto& f : outcome.failures) CHECK_FALSE(f.stoppedByAgent);  // both exited first
    const auto summary = summarize({FailureRecord{generation, 0, "testhost", outcome.failures}});
    CHECK(summary.rootCause.rank == 1);
    CHECK(summary.rootCause.exitCode == 1);
    REQUIRE(summary.others.size() == 1);
    CHECK(summary.others[0].collateral);
  }
}

TEST_CASE("a worker killed by SIGKILL is reported with the signal", "[supervisor]") {
  Fixture fx("sigkill", 2);
  Supervisor sup(fx.settings, {});
  const std::string ready = fx.dir + "/ready";
  std::thread killer([&] {
    if (!test::waitForFiles(fx.perRank(ready))) return;
    ::kill(std::stoi(test::readFile(ready + ".0")), SIGKILL);
  });
  auto outcome = sup.runGeneration(fx.specs({"--wait", "--ready-file", ready}), fx.logs, 0);
  killer.join();
  REQUIRE(outcome.kind == OutcomeKind::kFailed);
  const auto summary = summarize({FailureRecord{0, 0, "testhost", outcome.failures}});
  CHECK(summary.rootCause.rank == 0);
  CHECK(summary.rootCause.signal == SIGKILL);
  CHECK(ddprunExitCode(summary.rootCause) == 137);
  CHECK(formatSummary(summary, "worker").find("SIGKILL") != std::string::npos);
}

TEST_CASE("a stop signal to the agent is forwarded to every worker", "[supervisor]") {
  Fixture fx("forward", 2);
  Supervisor sup(fx.settings, {SIGUSR1});
  const std::string ready = fx.dir + "/ready", sig = fx.dir + "/sig";
  int which = GENERATE(SIGTERM, SIGHUP);
  auto sender = signalWhenReady(fx.perRank(ready), which);
  auto outcome = sup.runGeneration(
      fx.specs({"--wait", "--ready-file", ready, "--signal-file", sig}), fx.logs, 0);
  sender.join();
  CHECK(outcome.kind == OutcomeKind::kSignalled);
  CHECK(outcome.signal == which);
  for (const auto& file : fx.perRank(sig)) CHECK(test::readFile(file) == signalName(which));
  for (const auto& f : outcome.failures) CHECK(f.exitCode == 128 + which);
}

TEST_CASE("a notice (SIGUSR1) is forwarded without a kill timer; workers exiting 0 succeed",
          "[supervisor]") {
  Fixture fx("notice", 2);
  fx.settings.shutdownTimeout = 1ms;  // a kill timer, if one started, would fire at once
  Supervisor sup(fx.settings, {SIGUSR1});
  const std::string ready = fx.dir + "/ready", sig = fx.dir + "/sig";
  auto sender = signalWhenReady(fx.perRank(ready), SIGUSR1);
  auto outcome = sup.runGeneration(fx.specs({"--wait", "--exit-after-signal", "0", "--ready-file",
                                             ready, "--signal-file", sig}),
                                   fx.logs, 0);
  sender.join();
  CHECK(outcome.kind == OutcomeKind::kSucceeded);
  CHECK(outcome.failures.empty());
  for (const auto& file : fx.perRank(sig)) CHECK(test::readFile(file) == "SIGUSR1");
}

TEST_CASE("a worker's exit comes through its guardian exactly, with the worker's pid",
          "[supervisor]") {
  Fixture fx("exact", 2);
  Supervisor sup(fx.settings, {});
  const std::string ready = fx.dir + "/ready";
  auto outcome = sup.runGeneration(
      fx.specs({"--fail-rank", "1", "--raise", std::to_string(SIGUSR2), "--ready-file", ready}),
      fx.logs, 0);
  REQUIRE(outcome.kind == OutcomeKind::kFailed);
  // Rank 0 exits 0 unless the stop after rank 1's failure reaches it first.
  auto it = std::find_if(outcome.failures.begin(), outcome.failures.end(),
                         [](const WorkerFailure& f) { return f.rank == 1; });
  REQUIRE(it != outcome.failures.end());
  const WorkerFailure& f = *it;
  CHECK(f.signal == SIGUSR2);
  CHECK(f.exitCode == 0);
  CHECK(f.pid == std::stoi(test::readFile(ready + ".1")));  // the worker, not its guardian
}

TEST_CASE("workers ignoring SIGTERM are killed after the grace", "[supervisor]") {
  Fixture fx("grace", 2);
  fx.settings.shutdownTimeout = 300ms;
  Supervisor sup(fx.settings, {});
  const std::string ready = fx.dir + "/ready";
  auto sender = signalWhenReady(fx.perRank(ready), SIGTERM);
  const auto start = std::chrono::steady_clock::now();
  auto outcome =
      sup.runGeneration(fx.specs({"--wait", "--ignore-term", "--ready-file", ready}), fx.logs, 0);
  sender.join();
  CHECK(outcome.kind == OutcomeKind::kSignalled);
  REQUIRE(outcome.failures.size() == 2);
  for (const auto& f : outcome.failures) CHECK(f.signal == SIGKILL);
  CHECK(std::chrono::steady_clock::now() - start >= 300ms);
}

TEST_CASE("redirects, tee and the local-ranks filter route each stream", "[supervisor]") {
  Fixture fx("routing", 3);
  fx.settings.redirects.all = StdStreams::kBoth;     // files only ...
  fx.settings.tee.perRank[0] = StdStreams::kStdout;  // ... but rank 0 tees stdout
  fx.settings.tee.perRank[1] = StdStreams::kBoth;    // and rank 1 both,
  fx.settings.localRanksFilter = {0, 2};             // which the filter then hides
  fx.settings.prefixTemplate = "<{host}|{rank}|{local_rank}|{role}> ";
  Supervisor sup(fx.settings, {});
  auto outcome = sup.runGeneration(fx.specs({"--print", "2"}), fx.logs, 0);
  REQUIRE(outcome.kind == OutcomeKind::kSucceeded);
  const auto console = test::lines(test::readFile(fx.consolePath));
  CHECK(console == std::vector<std::string>{"<testhost|0|0|default> out 0 line 0",
                                            "<testhost|0|0|default> out 0 line 1"});
  for (int r = 0; r < 3; ++r) {
    const std::string n = std::to_string(r);
    CHECK(test::readFile(fx.logs.stdoutPath(0, r)) ==
          "out " + n + " line 0\nout " + n + " line 1\n");
    CHECK(test::readFile(fx.logs.stderrPath(0, r)) ==
          "err " + n + " line 0\nerr " + n + " line 1\n");
  }
}

TEST_CASE("a missing program is a SpawnError and leaves nothing running", "[supervisor]") {
  Fixture fx("spawnerror", 2);
  Supervisor sup(fx.settings, {});
  auto specs = fx.specs({});
  specs[1].argv[0] = fx.dir + "/no-such-program";
  CHECK_THROWS_AS(sup.runGeneration(std::move(specs), fx.logs, 0), SpawnError);
}

}  // namespace ddp

namespace ddp {

TEST_CASE("a rendezvous event for the running generation stops the group", "[supervisor]") {
  Fixture fx("rdzvevent", 2);
  Supervisor sup(fx.settings, {});
  const std::string ready = fx.dir + "/ready", sig = fx.dir + "/sig";
  std::thread heartbeat([&] {
    if (!test::waitForFiles(fx.perRank(ready))) return;
    // An event for another generation is dropped; the one for generation 4 ends it.
    sup.postRendezvousEvent({RendezvousEventKind::kPeerLost, 3, "stale"});
    sup.postRendezvousEvent({RendezvousEventKind::kScaleUp, 4, "node 2 waits"});
  });
  auto outcome = sup.runGeneration(
      fx.specs({"--wait", "--ready-file", ready, "--signal-file", sig}, 4), fx.logs, 4);
  heartbeat.join();
  REQUIRE(outcome.kind == OutcomeKind::kRendezvousEvent);
  CHECK(outcome.event.kind == RendezvousEventKind::kScaleUp);
  for (const auto& file : fx.perRank(sig)) CHECK(test::readFile(file) == "SIGTERM");
}

}  // namespace ddp
