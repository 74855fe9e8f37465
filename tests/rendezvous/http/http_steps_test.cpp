// Straggler detection on the status pages (rendezvous/http/http_steps.hpp): the agents' records
// become /status's "stragglers" and "step_median_s" and /metrics' per-rank gauges.
#include "rendezvous/http/http_steps.hpp"

#include <catch2/catch.hpp>

#include "rendezvous/http/http_metrics.hpp"

namespace ddp {

namespace {

using nlohmann::json;

JobView jobWithSteps() {
  JobView job;
  job.runId = "job7";
  job.state = "running";
  job.generation = 0;
  NodeView n0, n1;
  n0.rank = 0;
  n0.host = "n1";
  n0.status = json::parse(R"({"step_median_s": 0.005, "workers": [
      {"local_rank": 0, "rank": 0, "state": "running", "compute_s": 0.005, "straggler": false},
      {"local_rank": 1, "rank": 1, "state": "running", "compute_s": 0.0052, "straggler": false}]})");
  n1.rank = 1;
  n1.host = "n2";
  n1.status = json::parse(R"({"workers": [
      {"local_rank": 0, "rank": 3, "state": "running", "compute_s": 0.05, "straggler": true},
      {"local_rank": 1, "rank": 2, "state": "running", "compute_s": null, "straggler": false}]})");
  job.nodes = {n0, n1};
  return job;
}

}  // namespace

TEST_CASE("/status lists the flagged ranks and the job's median", "[straggler]") {
  const JobView job = jobWithSteps();
  const auto ranks = rankSteps(job);
  REQUIRE(ranks.size() == 3);  // rank 2 has no figure yet
  CHECK(ranks[0].rank == 0);
  CHECK(ranks[2].rank == 3);
  CHECK(ranks[2].groupRank == 1);
  CHECK(jobStepMedian(job) == 0.005);
  const json status = statusJson({job}, nullptr);
  const json& j = status["jobs"][0];
  CHECK(j["step_median_s"] == 0.005);
  REQUIRE(j["stragglers"].size() == 1);
  CHECK(j["stragglers"][0]["rank"] == 3);
  CHECK(j["stragglers"][0]["host"] == "n2");
  CHECK(j["stragglers"][0]["x_median"] == 10.0);
}

TEST_CASE("/metrics has a step time and a straggler gauge per rank", "[straggler]") {
  const std::string m = jobMetricsText({jobWithSteps()});
  CHECK(m.find("# TYPE ddprun_rank_step_seconds gauge\n") != std::string::npos);
  CHECK(m.find("ddprun_rank_step_seconds{job=\"job7\",rank=\"3\"} 0.05\n") != std::string::npos);
  CHECK(m.find("ddprun_rank_straggler{job=\"job7\",rank=\"3\"} 1\n") != std::string::npos);
  CHECK(m.find("ddprun_rank_straggler{job=\"job7\",rank=\"0\"} 0\n") != std::string::npos);
  CHECK(m.find("rank=\"2\"") == std::string::npos);  // no figure, no sample
  CHECK(m.find("ddprun_job_step_median_seconds{job=\"job7\"} 0.005\n") != std::string::npos);
}

TEST_CASE("a job without straggler detection has no step fields", "[straggler]") {
  JobView job;
  job.runId = "plain";
  NodeView n;
  n.status = json::parse(R"({"workers": [{"local_rank": 0, "rank": 0, "state": "running"}]})");
  job.nodes = {n};
  CHECK(rankSteps(job).empty());
  const json j = statusJson({job}, nullptr)["jobs"][0];
  CHECK(j["step_median_s"].is_null());
  CHECK(j["stragglers"].empty());
}

}  // namespace ddp
