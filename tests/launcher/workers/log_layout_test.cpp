// LogLayout: one folder per node under a shared --log-dir, created concurrently, never touching
// another node's files; the private temp dir removed at exit unless kept.
#include "launcher/workers/log_layout.hpp"

#include <catch2/catch.hpp>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <thread>
#include <vector>

#include "launcher_test_util.hpp"

namespace ddp {
namespace {

namespace fs = std::filesystem;

// Points $TMPDIR at a scratch dir for one test, restoring it afterwards.
class TmpDir {
 public:
  explicit TmpDir(const std::string& dir) {
    if (const char* old = std::getenv("TMPDIR")) old_ = old;
    ::setenv("TMPDIR", dir.c_str(), 1);
  }
  ~TmpDir() {
    if (old_.empty()) {
      ::unsetenv("TMPDIR");
    } else {
      ::setenv("TMPDIR", old_.c_str(), 1);
    }
  }

 private:
  std::string old_;
};

std::size_t entries(const std::string& dir) {
  return static_cast<std::size_t>(
      std::distance(fs::directory_iterator(dir), fs::directory_iterator()));
}

}  // namespace

TEST_CASE("each node writes below node_<rank>/ of the shared log dir", "[logs]") {
  const auto dir = test::scratchDir("layout");
  LogLayout logs(dir, "job", false);
  logs.beginGeneration(3, 2);
  CHECK(logs.errorFilePath(3, 1) == dir + "/job/node_2/attempt_3/1/error.json");
  CHECK(logs.stdoutPath(3, 0) == dir + "/job/node_2/attempt_3/0/stdout.log");
  CHECK(logs.stderrPath(0, 0) == dir + "/job/node_0/attempt_0/0/stderr.log");  // never begun
  CHECK(logs.contains(dir + "/job/node_2/attempt_3/1/error.json"));
  CHECK_FALSE(logs.contains(dir + "-other/x"));
  CHECK_FALSE(logs.isTemporary());
}

TEST_CASE("agents sharing a log dir create it concurrently and never remove each other's files",
          "[logs]") {
  const auto dir = test::scratchDir("shared");
  constexpr int kNodes = 4;
  for (int round = 0; round < 20; ++round) {
    const std::string root = dir + "/round" + std::to_string(round);
    std::vector<std::thread> agents;
    for (int node = 0; node < kNodes; ++node) {
      agents.emplace_back([root, node] {
        LogLayout logs(root, "job", false);
        logs.beginGeneration(0, node);
        logs.prepare(0, 2);
        std::ofstream(logs.errorFilePath(0, 1)) << "node " << node;
        logs.beginGeneration(1, node);  // the next generation: the earlier one stays
        logs.prepare(1, 2);
        std::ofstream(logs.errorFilePath(1, 1)) << "node " << node;
      });
    }
    for (auto& t : agents) t.join();
    INFO("round " << round);
    REQUIRE(entries(root + "/job") == kNodes);
    for (int node = 0; node < kNodes; ++node) {
      for (int g = 0; g < 2; ++g) {
        const std::string file = root + "/job/node_" + std::to_string(node) + "/attempt_" +
                                 std::to_string(g) + "/1/error.json";
        CHECK(test::readFile(file) == "node " + std::to_string(node));
      }
    }
  }
}

TEST_CASE("prepare clears only this node's attempt of that generation", "[logs]") {
  const auto dir = test::scratchDir("stale");
  LogLayout a(dir, "job", false), b(dir, "job", false);
  a.beginGeneration(0, 0);
  b.beginGeneration(0, 1);
  a.prepare(0, 1);
  b.prepare(0, 1);
  std::ofstream(a.errorFilePath(0, 0)) << "stale, from an earlier job with this run id";
  std::ofstream(b.errorFilePath(0, 0)) << "the other node's";
  a.prepare(0, 1);
  CHECK_FALSE(fs::exists(a.errorFilePath(0, 0)));
  CHECK(fs::is_directory(a.workerDir(0, 0)));
  CHECK(test::readFile(b.errorFilePath(0, 0)) == "the other node's");
}

TEST_CASE("the temp dir goes at exit unless a summary named files in it", "[logs]") {
  const auto tmp = test::scratchDir("tmpdir");
  TmpDir env(tmp);
  SECTION("removed") {
    {
      LogLayout logs("", "job", false);
      CHECK(logs.isTemporary());
      CHECK(logs.runDir().rfind(tmp + "/ddprun_", 0) == 0);
      logs.prepare(0, 2);
    }
    CHECK(entries(tmp) == 0);
  }
  SECTION("kept") {
    std::string file;
    {
      LogLayout logs("", "job", false);
      logs.prepare(0, 1);
      file = logs.errorFilePath(0, 0);
      std::ofstream(file) << "{}";
      REQUIRE(logs.contains(file));
      logs.keep();
    }
    CHECK(fs::exists(file));
  }
  SECTION("cleanUp before an _Exit, then the destructor") {
    LogLayout logs("", "job", false);
    logs.cleanUp();
    CHECK(entries(tmp) == 0);
  }
}

}  // namespace ddp
