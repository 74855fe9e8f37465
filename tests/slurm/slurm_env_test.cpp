// Unit tests of SlurmContext: what ddprun derives from SLURM_* variables.
#include <catch2/catch.hpp>

#include <set>

#include "launcher/cli/slurm_env.hpp"
#include "rendezvous/base/error.hpp"

using Env = std::map<std::string, std::string>;
using ddp::slurmContextFrom;

namespace {

// The variables srun sets for task 2 of `srun -N4 --ntasks-per-node=1` in job 42 (captured on the
// CI cluster, docs/deploy.md#slurm), trimmed to those that matter.
Env stepEnv() {
  return {{"SLURM_JOB_ID", "42"},           {"SLURM_JOBID", "42"},
          {"SLURM_STEP_ID", "0"},           {"SLURM_STEPID", "0"},
          {"SLURM_JOB_NODELIST", "n[1-4]"}, {"SLURM_STEP_NODELIST", "n[1-4]"},
          {"SLURM_JOB_NUM_NODES", "4"},     {"SLURM_STEP_NUM_NODES", "4"},
          {"SLURM_NNODES", "4"},            {"SLURM_NODEID", "2"},
          {"SLURM_LOCALID", "0"},           {"SLURM_PROCID", "2"}};
}

}  // namespace

TEST_CASE("outside Slurm nothing is detected", "[slurm_env]") {
  CHECK_FALSE(slurmContextFrom(Env{}).inSlurm);
  CHECK_FALSE(slurmContextFrom(Env{{"SLURM_JOB_ID", ""}, {"SLURM_NODEID", "x"}}).inSlurm);
  CHECK(ddp::describe(slurmContextFrom(Env{})) == "not in a Slurm job");
}

TEST_CASE("an srun step gives nodes, rank, first host, run id and port", "[slurm_env]") {
  ddp::SlurmContext c = slurmContextFrom(stepEnv());
  CHECK(c.inSlurm);
  CHECK(c.inStep);
  CHECK(c.nnodes == 4);
  CHECK(c.nodeRank == 2);
  CHECK(c.localTask == 0);
  CHECK(c.firstHost == "n1");
  CHECK(c.hosts == std::vector<std::string>{"n1", "n2", "n3", "n4"});
  CHECK(c.runId == "42.0");
  CHECK(c.port == 29642);
  CHECK_FALSE(c.portOverridden);
  CHECK(ddp::describe(c) == "Slurm step 42.0: node 2 of 4 (first host n1), rendezvous n1:29642");
}

TEST_CASE("the port rule stays inside 29600-30599 and honours DDP_SLURM_PORT", "[slurm_env]") {
  Env env = stepEnv();
  env["SLURM_JOB_ID"] = "123456";
  env["SLURM_STEP_ID"] = "3";
  CHECK(slurmContextFrom(env).port == 29600 + (456 + 389 * 3) % 1000);
  for (int job = 0; job < 5000; job += 37) {
    env["SLURM_JOB_ID"] = std::to_string(job);
    uint16_t port = slurmContextFrom(env).port;
    CHECK((port >= 29600 && port <= 30599));
  }
  env["DDP_SLURM_PORT"] = "31000";
  CHECK(slurmContextFrom(env).port == 31000);
  CHECK(slurmContextFrom(env).portOverridden);
  for (const char* bad : {"0", "65536", "http", "29500x", "-1"}) {
    env["DDP_SLURM_PORT"] = bad;
    INFO(bad);
    CHECK_THROWS_AS(slurmContextFrom(env), ddp::ConfigError);
  }
}

TEST_CASE("jobs and steps close in id never share a derived port", "[slurm_env]") {
  // The old rule, 29500 + (job + step) % 100, put jobs 59 and 159 (and job 100 step 1 next to
  // job 101 step 0) on one port: the second job's node 0 could not bind, its other nodes joined
  // the first job's store.
  Env env = stepEnv();
  std::map<uint16_t, std::string> taken;
  for (int job = 1000; job < 2000; ++job) {  // the first steps of 1000 consecutive jobs
    env["SLURM_JOB_ID"] = std::to_string(job);
    const uint16_t port = slurmContextFrom(env).port;
    const auto [it, fresh] = taken.emplace(port, std::to_string(job));
    INFO("job " << job << " and job " << it->second << " on port " << port);
    CHECK(fresh);
  }
  std::set<uint16_t> steps;  // the steps of one job
  env["SLURM_JOB_ID"] = "100";
  for (int step = 0; step < 8; ++step) {
    env["SLURM_STEP_ID"] = std::to_string(step);
    CHECK(steps.insert(slurmContextFrom(env).port).second);
  }
  env["SLURM_JOB_ID"] = "101";
  env["SLURM_STEP_ID"] = "0";
  CHECK_FALSE(steps.contains(slurmContextFrom(env).port));
  env["SLURM_JOB_ID"] = "59";
  env["SLURM_STEP_ID"] = "0";
  const uint16_t p59 = slurmContextFrom(env).port;
  env["SLURM_JOB_ID"] = "159";
  CHECK(slurmContextFrom(env).port != p59);
}

TEST_CASE("the step's node list wins over the job's", "[slurm_env]") {
  Env env = stepEnv();
  env["SLURM_JOB_NODELIST"] = "n[1-8]";
  env["SLURM_JOB_NUM_NODES"] = "8";
  env["SLURM_STEP_NODELIST"] = "n[5-6]";
  env["SLURM_STEP_NUM_NODES"] = "2";
  env["SLURM_NODEID"] = "1";
  ddp::SlurmContext c = slurmContextFrom(env);
  CHECK(c.nnodes == 2);
  CHECK(c.firstHost == "n5");
  CHECK(c.nodeRank == 1);
}

TEST_CASE("the batch script (no step) uses the job's values", "[slurm_env]") {
  Env env{{"SLURM_JOB_ID", "7"},
          {"SLURM_JOB_NODELIST", "gpu-[01-02],cpu9"},
          {"SLURM_JOB_NUM_NODES", "3"},
          {"SLURM_NODEID", "0"}};
  ddp::SlurmContext c = slurmContextFrom(env);
  CHECK_FALSE(c.inStep);
  CHECK(c.runId == "7");
  CHECK(c.nnodes == 3);
  CHECK(c.firstHost == "gpu-01");
  CHECK(c.port == 29607);
  // Legacy names only.
  c = slurmContextFrom(Env{{"SLURM_JOBID", "8"}, {"SLURM_NODELIST", "a,b"}, {"SLURM_NNODES", "2"}});
  CHECK(c.inSlurm);
  CHECK(c.nnodes == 2);
  CHECK(c.firstHost == "a");
}

TEST_CASE("malformed variables are ConfigErrors naming the variable", "[slurm_env]") {
  auto messageOf = [](const Env& env) {
    try {
      slurmContextFrom(env);
    } catch (const ddp::ConfigError& e) {
      return std::string(e.what());
    }
    return std::string("no error");
  };
  Env env = stepEnv();
  env["SLURM_NODEID"] = "4";
  CHECK_THAT(messageOf(env), Catch::Contains("SLURM_NODEID='4'"));
  env = stepEnv();
  env["SLURM_STEP_NUM_NODES"] = "four";
  CHECK_THAT(messageOf(env), Catch::Contains("SLURM_STEP_NUM_NODES='four'"));
  env = stepEnv();
  env["SLURM_STEP_NUM_NODES"] = "3";
  CHECK_THAT(messageOf(env), Catch::Contains("disagrees with SLURM_STEP_NODELIST"));
  env = stepEnv();
  env["SLURM_STEP_NODELIST"] = "n[1-4";
  CHECK_THAT(messageOf(env), Catch::Contains("'n[1-4'"));
  CHECK_THAT(messageOf(Env{{"SLURM_JOB_ID", "5"}}), Catch::Contains("no node list"));
}

TEST_CASE("several tasks per node are reported", "[slurm_env]") {
  Env env = stepEnv();
  env["SLURM_LOCALID"] = "1";
  ddp::SlurmContext c = slurmContextFrom(env);
  CHECK(c.localTask == 1);
  CHECK_THAT(ddp::describe(c), Catch::Contains("--ntasks-per-node=1"));
}
