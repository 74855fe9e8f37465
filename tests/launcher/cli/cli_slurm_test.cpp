// The command line inside a Slurm step: SLURM_* fill what the user left unset, an elastic job
// orders its nodes by SLURM_NODEID, and the detection stays out of the way when it should
// (docs/deploy.md).
#include <catch2/catch.hpp>

#include "launcher/cli/cli.hpp"
#include "tests/launcher/cli_test_util.hpp"

using namespace cli_test;

TEST_CASE("inside an srun step, SLURM_* fill what the user left unset", "[cli][slurm]") {
  Env slurm = {{"SLURM_JOB_ID", "42"},          {"SLURM_STEP_ID", "0"},  {"SLURM_STEP_NODELIST", "n[1-4]"},
               {"SLURM_STEP_NUM_NODES", "4"},   {"SLURM_NODEID", "1"},   {"SLURM_LOCALID", "0"}};
  auto c = parse({"--nproc-per-node=2", "train"}, slurm);
  CHECK(c.minNodes == 4);
  CHECK(c.maxNodes == 4);
  CHECK(c.nodeRank == 1);
  CHECK_FALSE(c.standalone);
  CHECK(c.rdzvBackend == ddp::RdzvBackend::kC10d);
  CHECK(c.rdzvEndpoints == std::vector<ddp::Endpoint>{{"n1", 29642}});  // slurm_env.hpp's rule
  CHECK(c.rdzvEndpointSource == "Slurm");
  CHECK(c.rdzvId == "42.0");
  CHECK(c.rdzvIdSource == "Slurm");
  CHECK(c.rdzvConf.isHost == false);
  CHECK(std::any_of(c.notes.begin(), c.notes.end(),
                    [](auto& n) { return n.find("Slurm step 42.0") != std::string::npos; }));
  slurm["SLURM_NODEID"] = "0";
  CHECK(parse({"train"}, slurm).rdzvConf.isHost == true);

  // Explicit values win, on the command line or through PET_*.
  slurm["SLURM_NODEID"] = "1";
  Env both = slurm;
  both["PET_RDZV_ID"] = "x";
  auto e = parse({"--nnodes=2", "--rdzv-endpoint=head:29400", "train"}, both);
  CHECK(e.maxNodes == 2);
  CHECK(e.rdzvEndpoints.at(0).host == "head");
  CHECK(e.rdzvId == "x");
  CHECK(e.nodeRank == 1);
  CHECK_FALSE(e.rdzvConf.isHost.has_value());  // a ddprund endpoint decides hosting, not Slurm

  // Static backend: the first host and the port become the master.
  auto st = parse({"--rdzv-backend=static", "train"}, slurm);
  CHECK(st.masterAddr == "n1");
  CHECK(st.masterPort == 29642);
  CHECK(st.rdzvEndpoints.at(0).host == "n1");
}

TEST_CASE("an elastic Slurm job orders nodes by SLURM_NODEID instead of fixing their rank",
          "[cli][slurm]") {
  Env slurm = {{"SLURM_JOB_ID", "42"},        {"SLURM_STEP_ID", "0"}, {"SLURM_STEP_NODELIST", "n[1-4]"},
               {"SLURM_STEP_NUM_NODES", "4"}, {"SLURM_NODEID", "2"},  {"SLURM_LOCALID", "0"}};
  auto elastic = parse({"--nnodes=3:4", "train"}, slurm);
  CHECK_FALSE(elastic.nodeRank.has_value());
  CHECK(elastic.nodeOrder == 2);
  auto fixed = parse({"--nnodes=4", "train"}, slurm);
  CHECK(fixed.nodeRank == 2);
  CHECK_FALSE(fixed.nodeOrder.has_value());
}

TEST_CASE("Slurm detection stays out of the way when it should", "[cli][slurm]") {
  Env slurm = {{"SLURM_JOB_ID", "42"}, {"SLURM_STEP_ID", "0"}, {"SLURM_STEP_NODELIST", "n[1-4]"},
               {"SLURM_NODEID", "1"}};
  CHECK(parse({"--no-slurm", "train"}, slurm).standalone);
  Env noSlurm = slurm;
  noSlurm["DDP_NO_SLURM"] = "1";
  CHECK(parse({"train"}, noSlurm).standalone);
  CHECK(parse({"--standalone", "train"}, slurm).maxNodes == 1);
  Env batch = slurm;  // the batch script itself: one agent would wait for four
  batch.erase("SLURM_STEP_ID");
  batch["SLURM_JOB_NODELIST"] = "n[1-4]";
  CHECK(parse({"train"}, batch).standalone);
  Env twoPerNode = slurm;
  twoPerNode["SLURM_LOCALID"] = "1";
  CHECK_THAT(errorOf({"train"}, twoPerNode), Catch::Contains("--ntasks-per-node=1"));
  Env broken = slurm;
  broken["SLURM_NODEID"] = "nine";
  CHECK_THAT(errorOf({"train"}, broken), Catch::Contains("SLURM_NODEID"));
  CHECK_THAT(errorOf({"train"}, broken), Catch::Contains("--no-slurm"));
}
