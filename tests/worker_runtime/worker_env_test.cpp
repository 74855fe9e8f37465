// WorkerEnv::fromEnvironment: the torchrun env contract, good and bad.
#include <catch2/catch.hpp>

#include <cstdlib>
#include <map>
#include <optional>
#include <string>

#include "rendezvous/base/error.hpp"
#include "worker_runtime/worker_env.hpp"

namespace {

const char* const kVars[] = {"RANK", "LOCAL_RANK", "WORLD_SIZE", "LOCAL_WORLD_SIZE", "GROUP_RANK",
                             "GROUP_WORLD_SIZE", "MASTER_ADDR", "MASTER_PORT",
                             "TORCHELASTIC_RESTART_COUNT", "TORCHELASTIC_MAX_RESTARTS",
                             "TORCHELASTIC_RUN_ID", "TORCHELASTIC_ERROR_FILE",
                             "TORCHELASTIC_USE_AGENT_STORE"};

// Clears the contract's variables for one test and restores the originals afterwards.
class EnvGuard {
 public:
  EnvGuard() {
    for (const char* name : kVars) {
      const char* value = std::getenv(name);
      if (value != nullptr) saved_[name] = value;
      ::unsetenv(name);
    }
  }
  ~EnvGuard() {
    for (const char* name : kVars) {
      auto it = saved_.find(name);
      if (it == saved_.end()) {
        ::unsetenv(name);
      } else {
        ::setenv(name, it->second.c_str(), 1);
      }
    }
  }
  void set(const char* name, const std::string& value) { ::setenv(name, value.c_str(), 1); }
  void unset(const char* name) { ::unsetenv(name); }
  void setMinimal() {
    set("RANK", "1");
    set("WORLD_SIZE", "4");
    set("MASTER_ADDR", "10.1.2.3");
    set("MASTER_PORT", "29500");
  }

 private:
  std::map<std::string, std::string> saved_;
};

std::string errorOf() {
  try {
    ddp::WorkerEnv::fromEnvironment();
  } catch (const ddp::ConfigError& e) {
    return e.what();
  }
  return "no error";
}

}  // namespace

TEST_CASE("a full torchrun environment is read field by field", "[worker_env]") {
  EnvGuard env;
  env.set("RANK", "5");
  env.set("LOCAL_RANK", "1");
  env.set("WORLD_SIZE", "8");
  env.set("LOCAL_WORLD_SIZE", "4");
  env.set("GROUP_RANK", "1");
  env.set("GROUP_WORLD_SIZE", "2");
  env.set("MASTER_ADDR", "node0.example.com");
  env.set("MASTER_PORT", "41234");
  env.set("TORCHELASTIC_RESTART_COUNT", "3");
  env.set("TORCHELASTIC_MAX_RESTARTS", "5");
  env.set("TORCHELASTIC_RUN_ID", "job7");
  env.set("TORCHELASTIC_ERROR_FILE", "/tmp/x/error.json");
  env.set("TORCHELASTIC_USE_AGENT_STORE", "True");
  auto w = ddp::WorkerEnv::fromEnvironment();
  CHECK(w.rank == 5);
  CHECK(w.localRank == 1);
  CHECK(w.worldSize == 8);
  CHECK(w.localWorldSize == 4);
  CHECK(w.groupRank == 1);
  CHECK(w.groupWorldSize == 2);
  CHECK(w.master.host == "node0.example.com");
  CHECK(w.master.port == 41234);
  CHECK(w.restartCount == 3);
  CHECK(w.maxRestarts == 5);
  CHECK(w.runId == "job7");
  CHECK(w.errorFile == "/tmp/x/error.json");
  CHECK(w.useAgentStore);
}

TEST_CASE("only RANK, WORLD_SIZE, MASTER_ADDR and MASTER_PORT are required", "[worker_env]") {
  EnvGuard env;
  env.setMinimal();
  auto w = ddp::WorkerEnv::fromEnvironment();
  CHECK(w.rank == 1);
  CHECK(w.localRank == 1);  // defaults to RANK
  CHECK(w.localWorldSize == 4);
  CHECK(w.groupRank == 0);
  CHECK(w.groupWorldSize == 1);
  CHECK(w.restartCount == 0);
  CHECK(w.errorFile.empty());
  CHECK_FALSE(w.useAgentStore);
}

TEST_CASE("each missing required variable is named", "[worker_env]") {
  for (const char* name : {"RANK", "WORLD_SIZE", "MASTER_ADDR", "MASTER_PORT"}) {
    EnvGuard env;
    env.setMinimal();
    env.unset(name);
    INFO(name);
    auto message = errorOf();
    CHECK_THAT(message, Catch::Contains(name) && Catch::Contains("not set"));
  }
}

TEST_CASE("malformed values are rejected with the variable and its value", "[worker_env]") {
  struct Case {
    const char* name;
    const char* value;
    const char* expected;
  };
  const Case cases[] = {
      {"RANK", "x", "RANK='x' is not an integer"},
      {"RANK", "1.5", "RANK='1.5' is not an integer"},
      {"RANK", " 1", "RANK=' 1' is not an integer"},
      {"RANK", "4", "RANK=4 must be < WORLD_SIZE=4"},
      {"RANK", "-1", "RANK=-1 must be in [0,"},
      {"WORLD_SIZE", "0", "WORLD_SIZE=0 must be in [1,"},
      {"WORLD_SIZE", "99999999999999999999", "WORLD_SIZE='99999999999999999999' is out of range"},
      {"MASTER_PORT", "0", "MASTER_PORT=0 must be in [1, 65535]"},
      {"MASTER_PORT", "65536", "MASTER_PORT=65536 must be in [1, 65535]"},
      {"MASTER_PORT", "http", "MASTER_PORT='http' is not an integer"},
      {"MASTER_ADDR", "", "MASTER_ADDR is set but empty"},
      {"LOCAL_RANK", "2", "LOCAL_RANK=2 must be < LOCAL_WORLD_SIZE=2"},
      {"GROUP_RANK", "1", "GROUP_RANK=1 must be < GROUP_WORLD_SIZE=1"},
      {"TORCHELASTIC_RESTART_COUNT", "two", "TORCHELASTIC_RESTART_COUNT='two' is not an integer"},
      {"TORCHELASTIC_USE_AGENT_STORE", "yes", "TORCHELASTIC_USE_AGENT_STORE='yes'"},
  };
  for (const auto& c : cases) {
    EnvGuard env;
    env.setMinimal();
    env.set("LOCAL_WORLD_SIZE", "2");
    env.set("LOCAL_RANK", "1");
    env.set(c.name, c.value);
    INFO(c.name << "=" << c.value);
    CHECK_THAT(errorOf(), Catch::Contains(c.expected));
  }
}

TEST_CASE("LOCAL_WORLD_SIZE may not exceed WORLD_SIZE", "[worker_env]") {
  EnvGuard env;
  env.setMinimal();
  env.set("LOCAL_WORLD_SIZE", "5");
  CHECK_THAT(errorOf(), Catch::Contains("LOCAL_WORLD_SIZE=5 must be <= WORLD_SIZE=4"));
}
