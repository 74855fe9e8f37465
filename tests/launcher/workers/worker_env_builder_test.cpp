// The worker env contract (torchrun's, reference §2) and ${local_rank} substitution.
#include "launcher/workers/worker_env_builder.hpp"

#include <catch2/catch.hpp>

#include "ddp_version.hpp"

namespace ddp {
namespace {

RendezvousResult twoNodeRound() {
  RendezvousResult round;
  round.generation = 2;
  round.nodeRank = 1;
  round.nodeCount = 2;
  round.baseRank = 4;
  round.worldSize = 8;
  round.baseRoleRank = 4;
  round.roleWorldSize = 8;
  return round;
}

}  // namespace

TEST_CASE("every torchrun variable is set for each local rank", "[env]") {
  LaunchConfig config;
  config.nprocPerNode = 4;
  config.maxRestarts = 3;
  config.role = "trainer";
  config.command = {"python3", "-u", "train.py", "--out=ckpt_${local_rank}"};
  WorkerEnvBuilder builder(config, "job7", {{"PATH", "/bin"}, {"HOME", "/root"}});
  const auto spec = builder.build(3, twoNodeRound(), {"10.0.0.1", 41234}, "/logs/e.json");
  const EnvMap expected = {{"PATH", "/bin"},
                           {"HOME", "/root"},
                           {"LOCAL_RANK", "3"},
                           {"RANK", "7"},
                           {"GROUP_RANK", "1"},
                           {"ROLE_RANK", "7"},
                           {"ROLE_NAME", "trainer"},
                           {"LOCAL_WORLD_SIZE", "4"},
                           {"WORLD_SIZE", "8"},
                           {"GROUP_WORLD_SIZE", "2"},
                           {"ROLE_WORLD_SIZE", "8"},
                           {"MASTER_ADDR", "10.0.0.1"},
                           {"MASTER_PORT", "41234"},
                           {"TORCHELASTIC_RESTART_COUNT", "2"},
                           {"TORCHELASTIC_MAX_RESTARTS", "3"},
                           {"TORCHELASTIC_RUN_ID", "job7"},
                           {"TORCHELASTIC_USE_AGENT_STORE", "True"},
                           {"TORCHELASTIC_ERROR_FILE", "/logs/e.json"},
                           {"DDP_AGENT_VERSION", DDP_VERSION_STRING},
                           {"TORCH_NCCL_ASYNC_ERROR_HANDLING", "1"},
                           {"NCCL_ASYNC_ERROR_HANDLING", "1"},
                           {"OMP_NUM_THREADS", "1"}};
  CHECK(spec.env == expected);
  CHECK(spec.rank == 7);
  CHECK(spec.argv == std::vector<std::string>{"python3", "-u", "train.py", "--out=ckpt_3"});
  CHECK(builder.ompThreadsDefaulted());
}

TEST_CASE("the agent's own values win where torchrun keeps them", "[env]") {
  LaunchConfig config;
  config.nprocPerNode = 2;
  config.command = {"w"};
  WorkerEnvBuilder builder(
      config, "r", {{"OMP_NUM_THREADS", "8"}, {"NCCL_ASYNC_ERROR_HANDLING", "0"}, {"RANK", "99"}});
  const auto env = builder.build(0, twoNodeRound(), {"h", 1}, "").env;
  CHECK(env.at("OMP_NUM_THREADS") == "8");
  CHECK(env.at("NCCL_ASYNC_ERROR_HANDLING") == "0");
  CHECK(env.at("TORCH_NCCL_ASYNC_ERROR_HANDLING") == "0");
  CHECK(env.at("RANK") == "4");  // the contract overrides an inherited value
  CHECK_FALSE(builder.ompThreadsDefaulted());
}

TEST_CASE("the ddprun Python package's folder comes first on PYTHONPATH", "[env]") {
  LaunchConfig config;
  config.command = {"python3", "-u", "s.py"};
  config.pythonPath = "/opt/ddprun/lib/ddprun/python";
  const RendezvousResult round;
  CHECK(WorkerEnvBuilder(config, "r", {}).build(0, round, {"h", 1}, "").env.at("PYTHONPATH") ==
        "/opt/ddprun/lib/ddprun/python");
  CHECK(WorkerEnvBuilder(config, "r", {{"PYTHONPATH", "/mine:/also"}})
            .build(0, round, {"h", 1}, "")
            .env.at("PYTHONPATH") == "/opt/ddprun/lib/ddprun/python:/mine:/also");
  CHECK(WorkerEnvBuilder(config, "r", {{"PYTHONPATH", ""}}).build(0, round, {"h", 1}, "")
            .env.at("PYTHONPATH") == "/opt/ddprun/lib/ddprun/python");
  config.pythonPath = "";  // none found beside ddprun: the user's PYTHONPATH as it is
  CHECK(WorkerEnvBuilder(config, "r", {{"PYTHONPATH", "/mine"}}).build(0, round, {"h", 1}, "")
            .env.at("PYTHONPATH") == "/mine");
  CHECK(WorkerEnvBuilder(config, "r", {}).build(0, round, {"h", 1}, "").env.count("PYTHONPATH") == 0);
}

TEST_CASE("one worker per node leaves OMP_NUM_THREADS alone", "[env]") {
  LaunchConfig config;
  config.command = {"w"};
  WorkerEnvBuilder builder(config, "r", {});
  CHECK(builder.build(0, RendezvousResult{}, {"h", 1}, "").env.count("OMP_NUM_THREADS") == 0);
}

TEST_CASE("--virtual-local-rank shows each worker only its own device", "[env]") {
  LaunchConfig config;
  config.nprocPerNode = 2;
  config.virtualLocalRank = true;
  config.command = {"w"};
  SECTION("from the agent's CUDA_VISIBLE_DEVICES") {
    WorkerEnvBuilder builder(config, "r", {{"CUDA_VISIBLE_DEVICES", "4,6"}});
    const auto env = builder.build(1, RendezvousResult{}, {"h", 1}, "").env;
    CHECK(env.at("LOCAL_RANK") == "0");
    CHECK(env.at("CUDA_VISIBLE_DEVICES") == "6");
  }
  SECTION("without one") {
    WorkerEnvBuilder builder(config, "r", {});
    const auto env = builder.build(1, RendezvousResult{}, {"h", 1}, "").env;
    CHECK(env.at("LOCAL_RANK") == "0");
    CHECK(env.at("CUDA_VISIBLE_DEVICES") == "1");
  }
}

TEST_CASE("${local_rank} is substituted everywhere in an argument", "[env]") {
  CHECK(substituteLocalRank("a${local_rank}b${local_rank}", 5) == "a5b5");
  CHECK(substituteLocalRank("${local_rank}", 12) == "12");
  CHECK(substituteLocalRank("$local_rank {local_rank}", 1) == "$local_rank {local_rank}");
}

TEST_CASE("currentEnvironment reads this process's environment", "[env]") {
  ::setenv("DDP_ENV_BUILDER_PROBE", "a=b", 1);
  CHECK(currentEnvironment().at("DDP_ENV_BUILDER_PROBE") == "a=b");
}

}  // namespace ddp
