// The straggler fields of a node status record (launcher/status/node_steps.hpp): what an agent
// writes is what node rank 0 and ddprund read back; records without them, or broken ones, give
// nothing.
#include "launcher/status/node_steps.hpp"

#include <catch2/catch.hpp>
#include <nlohmann/json.hpp>

#include "launcher/status/node_status.hpp"

namespace ddp {

namespace {

NodeStatus twoWorkers(int nodeRank) {
  NodeStatus s;
  s.generation = 2;
  s.nodeRank = nodeRank;
  s.workers = {WorkerState{{.rank = 2 * nodeRank, .localRank = 0}, 100},
               WorkerState{{.rank = 2 * nodeRank + 1, .localRank = 1}, 101}};
  return s;
}

}  // namespace

TEST_CASE("a record's step fields are read back as written", "[straggler]") {
  NodeStatus s = twoWorkers(1);
  CHECK(stepFiguresOf(nodeStatusJson(s)).empty());  // without straggler detection: no fields
  CHECK(nlohmann::json::parse(nodeStatusJson(s))["workers"][0].count("compute_s") == 0);
  s.steps = NodeSteps{{0.004, std::nullopt}, {false, false}, 0.003, 1.5, 30};
  const auto record = nlohmann::json::parse(nodeStatusJson(s));
  CHECK(record["workers"][0]["compute_s"] == 0.004);
  CHECK(record["workers"][1]["compute_s"].is_null());  // no beat in the window
  CHECK(record["workers"][1]["straggler"] == false);
  CHECK(record.count("step_median_s") == 0);  // only node rank 0 publishes the median
  CHECK(stepFiguresOf(record.dump()) == std::vector<double>{0.004});
  CHECK_FALSE(jobMedianOf(record.dump()));
}

TEST_CASE("node rank 0's record carries the job's median and the rule", "[straggler]") {
  NodeStatus s = twoWorkers(0);
  s.steps = NodeSteps{{0.004, 0.040}, {false, true}, 0.022, 2.0, 10};
  const std::string text = nodeStatusJson(s);
  const auto record = nlohmann::json::parse(text);
  CHECK(record["workers"][1]["straggler"] == true);
  CHECK(record["straggler_threshold"] == 2.0);
  CHECK(record["straggler_window_s"] == 10);
  REQUIRE(jobMedianOf(text));
  CHECK(*jobMedianOf(text) == 0.022);
  CHECK(stepFiguresOf(text) == std::vector<double>{0.004, 0.040});
}

TEST_CASE("broken records give no figures and no median", "[straggler]") {
  CHECK(stepFiguresOf("").empty());
  CHECK(stepFiguresOf("not json").empty());
  CHECK(stepFiguresOf(R"({"workers": 3})").empty());
  CHECK(stepFiguresOf(R"({"workers": [{"compute_s": "fast"}, {"compute_s": -1}, 7]})").empty());
  CHECK_FALSE(jobMedianOf(R"({"step_median_s": null})"));
  CHECK_FALSE(jobMedianOf("[1]"));
}

}  // namespace ddp
