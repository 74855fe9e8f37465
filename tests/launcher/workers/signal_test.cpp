// Signals as the shell sent them, end to end with ddprun: a signal ignored at start (nohup) stays
// ignored unless named in --signals-to-handle; a copy relayed by a wrapper in ddprun's process
// group (timeout) is not a second Ctrl-C; a notice (SIGUSR1) starts no kill timer and workers
// that exit 0 after it make ddprun exit 0.
#include <signal.h>
#include <unistd.h>

#include <catch2/catch.hpp>
#include <chrono>
#include <fstream>

#include "process_test_util.hpp"

namespace ddp {
namespace {

using namespace std::chrono_literals;

std::vector<std::string> perRank(const std::string& base, int n) {
  std::vector<std::string> out;
  for (int r = 0; r < n; ++r) out.push_back(base + "." + std::to_string(r));
  return out;
}

// ddprun --standalone with `flags`, running ddp_test_worker with `workerArgs`.
test::LaunchOptions ddprun(const std::string& dir, std::vector<std::string> flags,
                           const std::vector<std::string>& workerArgs) {
  test::LaunchOptions o;
  o.argv = {test::binDir() + "/ddprun", "--standalone", "--nproc-per-node=2"};
  o.argv.insert(o.argv.end(), flags.begin(), flags.end());
  o.argv.push_back(test::workerBin());
  o.argv.insert(o.argv.end(), workerArgs.begin(), workerArgs.end());
  o.outFile = dir + "/ddprun.out";
  o.errFile = dir + "/ddprun.err";
  return o;
}

bool ignoresSignal(const std::string& sigIgnHex, int sig) {
  return ((std::stoull(sigIgnHex, nullptr, 16) >> (sig - 1)) & 1) != 0;
}

}  // namespace

TEST_CASE("nohup: SIGHUP ignored at start stays ignored, for ddprun and its workers", "[signals]") {
  const auto dir = test::scratchDir("nohup");
  const std::string ready = dir + "/ready", sig = dir + "/sig", disp = dir + "/disp";
  auto o = ddprun(dir, {}, {"--wait", "--ready-file", ready, "--signal-file", sig,
                            "--dispositions-file", disp});
  o.ignore = {SIGHUP};
  test::Launched run(o);
  REQUIRE(test::waitForFiles(perRank(ready, 2)));
  ::kill(run.pid(), SIGHUP);  // discarded by the kernel: ddprun ignores it
  ::kill(run.pid(), SIGTERM);
  CHECK(run.wait() == 128 + SIGTERM);
  for (const auto& f : perRank(sig, 2)) CHECK(test::readFile(f) == "SIGTERM");
  for (const auto& f : perRank(disp, 2)) CHECK(ignoresSignal(test::readFile(f), SIGHUP));
}

TEST_CASE("nohup: SIGHUP named in --signals-to-handle is handled and forwarded", "[signals]") {
  const auto dir = test::scratchDir("nohup_named");
  const std::string ready = dir + "/ready", sig = dir + "/sig", disp = dir + "/disp";
  auto o = ddprun(dir, {"--signals-to-handle=SIGHUP,SIGTERM"},
                  {"--wait", "--ready-file", ready, "--signal-file", sig, "--dispositions-file",
                   disp});
  o.ignore = {SIGHUP};
  test::Launched run(o);
  REQUIRE(test::waitForFiles(perRank(ready, 2)));
  ::kill(run.pid(), SIGHUP);
  CHECK(run.wait() == 128 + SIGHUP);
  for (const auto& f : perRank(sig, 2)) CHECK(test::readFile(f) == "SIGHUP");
  for (const auto& f : perRank(disp, 2)) CHECK_FALSE(ignoresSignal(test::readFile(f), SIGHUP));
}

TEST_CASE("a copy relayed by timeout(1) in ddprun's group is not a second Ctrl-C", "[signals]") {
  const auto dir = test::scratchDir("relay");
  const std::string ready = dir + "/ready", sig = dir + "/sig", go = dir + "/go";
  auto o = ddprun(dir, {"--shutdown-timeout=120"},
                  {"--wait", "--ready-file", ready, "--signal-file", sig, "--linger-file", go});
  o.argv.insert(o.argv.begin(), {"/usr/bin/setsid", "/usr/bin/timeout", "120"});
  o.ownGroup = false;  // setsid: timeout leads a new session and group; ddprun is in it
  test::Launched timeout(o);
  REQUIRE(test::waitForFiles(perRank(ready, 2)));
  const auto children = test::childrenOf(timeout.pid());
  REQUIRE(children.size() == 1);
  const pid_t agent = children.front();
  const std::string err = dir + "/ddprun.err";
  // Ctrl-C's first copy from outside the group, then timeout forwarding its own copy.
  ::kill(agent, SIGINT);
  REQUIRE(test::waitForText(err, "received SIGINT; forwarding it to the workers"));
  ::kill(timeout.pid(), SIGINT);
  const std::string relayed =
      "received SIGINT again (from pid " + std::to_string(timeout.pid()) + ", a relay";
  CHECK(test::waitForText(err, relayed, 10s));
  std::ofstream(go).put('\n');
  CHECK(timeout.wait() == 128 + SIGINT);
  INFO(test::readFile(err));
  CHECK(test::readFile(err).find("second SIGINT") == std::string::npos);
  for (const auto& f : perRank(sig, 2)) CHECK(test::readFile(f) == "SIGINT");  // once each
}

TEST_CASE("kill -INT to the whole group of setsid timeout ddprun: one interrupt", "[signals]") {
  const auto dir = test::scratchDir("group_int");
  const std::string ready = dir + "/ready", sig = dir + "/sig", go = dir + "/go";
  auto o = ddprun(dir, {"--shutdown-timeout=120"},
                  {"--wait", "--ready-file", ready, "--signal-file", sig, "--linger-file", go});
  o.argv.insert(o.argv.begin(), {"/usr/bin/setsid", "/usr/bin/timeout", "120"});
  o.ownGroup = false;
  test::Launched timeout(o);
  REQUIRE(test::waitForFiles(perRank(ready, 2)));
  const std::string err = dir + "/ddprun.err";
  ::kill(-timeout.pid(), SIGINT);  // ddprun gets this copy and timeout's
  REQUIRE(test::waitForText(err, "received SIGINT; forwarding it to the workers"));
  std::ofstream(go).put('\n');
  CHECK(timeout.wait() == 128 + SIGINT);
  INFO(test::readFile(err));
  CHECK(test::readFile(err).find("second SIGINT") == std::string::npos);
  for (const auto& f : perRank(sig, 2)) CHECK(test::readFile(f) == "SIGINT");
}

TEST_CASE("SIGUSR1 is a notice: no kill timer; workers exiting 0 make ddprun exit 0",
          "[signals]") {
  const auto dir = test::scratchDir("notice");
  const std::string ready = dir + "/ready", sig = dir + "/sig";
  test::Launched run(ddprun(dir, {"--signals-to-handle=SIGTERM,SIGINT,SIGUSR1"},
                            {"--wait", "--exit-after-signal", "0", "--ready-file", ready,
                             "--signal-file", sig}));
  REQUIRE(test::waitForFiles(perRank(ready, 2)));
  ::kill(run.pid(), SIGUSR1);
  CHECK(run.wait() == 0);
  for (const auto& f : perRank(sig, 2)) CHECK(test::readFile(f) == "SIGUSR1");
  const std::string err = test::readFile(dir + "/ddprun.err");
  INFO(err);
  CHECK(err.find("received SIGUSR1; forwarding it to the workers (they keep running)") !=
        std::string::npos);
}

}  // namespace ddp
