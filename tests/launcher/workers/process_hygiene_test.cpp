// Nothing outlives ddprun: a worker started through a non-exec shell wrapper, with a background
// grandchild, a nested shell's child and a process that left with setsid(), is gone entirely after
// SIGTERM of ddprun, within 1 s of kill -9 of ddprun, and when its guardian is killed.
#include <signal.h>
#include <unistd.h>

#include <catch2/catch.hpp>
#include <chrono>
#include <fstream>
#include <random>

#include "process_test_util.hpp"

namespace ddp {
namespace {

using namespace std::chrono_literals;

// The wrapper: bash that is not exec'ed away, starting three long sleeps and waiting. Each rank
// writes the pids of the wrapper and of the three sleeps to <base>.<rank> (4 lines, all at once).
const char* kWrapper = R"SH(#!/bin/bash
base=$1.$LOCAL_RANK
sleep 300 &
bg=$!
setsid sleep 300 &
away=$!
bash -c 'sleep 300 & echo $! > "$0.tmp" && mv "$0.tmp" "$0"; wait' "$base.nested" &
until [[ -s $base.nested ]]; do sleep 0.01; done
printf '%s\n' $$ $bg $away "$(cat "$base.nested")" > "$base.tmp" && mv "$base.tmp" "$base"
wait
)SH";

struct Tree {
  explicit Tree(const std::string& name, int nproc, std::vector<std::string> extraFlags = {})
      : dir(test::scratchDir(name)), cleanup("DDP_HYGIENE_MARK=" + name + "-" + randomTag()) {
    const std::string script = dir + "/wrapper.sh";
    std::ofstream(script) << kWrapper;
    std::filesystem::permissions(script, std::filesystem::perms::owner_all);
    test::LaunchOptions o;
    o.argv = {test::binDir() + "/ddprun", "--standalone", "--nproc-per-node=" + std::to_string(nproc),
              "--no-python"};
    o.argv.insert(o.argv.end(), extraFlags.begin(), extraFlags.end());
    o.argv.insert(o.argv.end(), {script, dir + "/pids"});
    const auto eq = cleanup.entry().find('=');
    o.env[cleanup.entry().substr(0, eq)] = cleanup.entry().substr(eq + 1);
    o.outFile = dir + "/ddprun.out";
    o.errFile = dir + "/ddprun.err";
    for (int r = 0; r < nproc; ++r) files.push_back(dir + "/pids." + std::to_string(r));
    run = std::make_unique<test::Launched>(o);
  }

  static std::string randomTag() { return std::to_string(std::random_device{}()); }

  // Every pid of every rank's tree (wrapper first), once all ranks wrote theirs.
  std::vector<pid_t> pids() {
    REQUIRE(test::waitForFiles(files));
    std::vector<pid_t> out;
    for (const auto& f : files) {
      for (const auto& line : test::lines(test::readFile(f))) out.push_back(std::stoi(line));
    }
    REQUIRE(out.size() == 4 * files.size());
    return out;
  }

  std::string dir;
  test::MarkedCleanup cleanup;
  std::vector<std::string> files;
  std::unique_ptr<test::Launched> run;
};

void checkAllGone(const std::vector<pid_t>& pids, std::chrono::milliseconds budget) {
  const auto deadline = std::chrono::steady_clock::now() + budget;
  for (pid_t pid : pids) {
    INFO("pid " << pid << " still runs");
    const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(
        deadline - std::chrono::steady_clock::now());
    CHECK(test::waitForPidGone(pid, std::max(left, 0ms)));
  }
}

}  // namespace

TEST_CASE("SIGTERM to ddprun: the whole tree of a wrapper-started worker is gone", "[hygiene]") {
  Tree tree("hyg_term", 2);
  const auto pids = tree.pids();
  ::kill(tree.run->pid(), SIGTERM);
  REQUIRE(tree.run->wait() == 128 + SIGTERM);
  checkAllGone(pids, 1s);
}

TEST_CASE("kill -9 of ddprun: every descendant of every worker is gone within 1 s", "[hygiene]") {
  Tree tree("hyg_kill", 2);
  const auto pids = tree.pids();
  ::kill(tree.run->pid(), SIGKILL);
  REQUIRE(tree.run->wait() == 128 + SIGKILL);
  checkAllGone(pids, 1s);
}

TEST_CASE("a killed guardian takes its worker's tree along; the worker is the root cause",
          "[hygiene]") {
  Tree tree("hyg_guardian", 2, {"--max-restarts=0"});
  const auto pids = tree.pids();
  const pid_t wrapper1 = pids[4];  // rank 1's wrapper
  const auto stat = test::procStat(wrapper1);
  REQUIRE(stat);
  const pid_t guardian = stat->ppid;
  REQUIRE(guardian != tree.run->pid());
  REQUIRE(test::procStat(guardian)->ppid == tree.run->pid());
  ::kill(guardian, SIGKILL);
  REQUIRE(tree.run->wait() == 128 + SIGKILL);
  const std::string err = test::readFile(tree.dir + "/ddprun.err");
  INFO(err);
  CHECK(err.find("guardian (pid " + std::to_string(guardian) + ")") != std::string::npos);
  CHECK(err.find("rank      : 1 (local_rank: 1)\n  exitcode  : -9 (SIGKILL) (pid: " +
                 std::to_string(wrapper1) + ")") != std::string::npos);
  checkAllGone(pids, 1s);
}

TEST_CASE("a worker's tree goes with the worker: ddprun still succeeds", "[hygiene]") {
  const auto dir = test::scratchDir("hyg_exit");
  test::MarkedCleanup cleanup("DDP_HYGIENE_MARK=exit-" + std::to_string(std::random_device{}()));
  const std::string script = dir + "/leaver.sh";
  // Exits 0 at once, leaving a background child and a setsid one behind.
  std::ofstream(script) << "#!/bin/bash\nsleep 300 & echo $! > \"$1.$LOCAL_RANK.tmp\"\n"
                           "setsid sleep 300 & echo $! >> \"$1.$LOCAL_RANK.tmp\"\n"
                           "mv \"$1.$LOCAL_RANK.tmp\" \"$1.$LOCAL_RANK\"\nexit 0\n";
  std::filesystem::permissions(script, std::filesystem::perms::owner_all);
  const auto eq = cleanup.entry().find('=');
  test::LaunchOptions o;
  o.argv = {test::binDir() + "/ddprun", "--standalone", "--nproc-per-node=1", "--no-python",
            script, dir + "/pids"};
  o.env[cleanup.entry().substr(0, eq)] = cleanup.entry().substr(eq + 1);
  o.outFile = dir + "/ddprun.out";
  o.errFile = dir + "/ddprun.err";
  test::Launched run(o);
  REQUIRE(run.wait() == 0);
  std::vector<pid_t> pids;
  for (const auto& line : test::lines(test::readFile(dir + "/pids.0"))) pids.push_back(std::stoi(line));
  REQUIRE(pids.size() == 2);
  checkAllGone(pids, 1s);
}

TEST_CASE("a worker killed while it held a linked allreduce segment leaves nothing in /dev/shm",
          "[hygiene]") {
  const auto dir = test::scratchDir("hyg_shm");
  const std::string script = dir + "/segment.sh";
  // Links a segment named as train's shared-memory allreduce names them (its pid first), then dies
  // by SIGKILL before it could remove it, as a rank 0 killed during that set-up would.
  std::ofstream(script) << "#!/bin/bash\nname=/dev/shm/ddprun-allreduce-$$-1\n: > \"$name\"\n"
                           "echo \"$name\" > \"$1.tmp\" && mv \"$1.tmp\" \"$1\"\nkill -9 $$\n";
  std::filesystem::permissions(script, std::filesystem::perms::owner_all);
  test::LaunchOptions o;
  o.argv = {test::binDir() + "/ddprun", "--standalone", "--nproc-per-node=1", "--no-python",
            "--max-restarts=0", script, dir + "/segment"};
  o.outFile = dir + "/ddprun.out";
  o.errFile = dir + "/ddprun.err";
  test::Launched run(o);
  REQUIRE(run.wait() == 128 + SIGKILL);
  const std::string segment = test::lines(test::readFile(dir + "/segment")).at(0);
  INFO(segment);
  CHECK_FALSE(std::filesystem::exists(segment));
}

}  // namespace ddp
