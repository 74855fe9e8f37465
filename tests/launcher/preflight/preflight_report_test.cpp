// The preflight checks as pure functions (preflight_report.hpp): which reports raise which flags,
// the table node rank 0 prints, and the records' JSON.
#include <catch2/catch.hpp>

#include "launcher/preflight/preflight_report.hpp"
#include "rendezvous/base/error.hpp"

using namespace ddp;
using Catch::Matchers::Contains;

namespace {

NodeReport healthy(const std::string& host) {
  NodeReport r;
  r.host = host;
  r.workers = 2;
  r.fingerprint.ddprun = "0.1.0";
  r.fingerprint.kernel = "6.1.0";
  r.fingerprint.cudaDriver = "13.0";
  r.fingerprint.cudaRuntime = "13.0";
  r.fingerprint.nccl = "2.28.9";
  r.fingerprint.torch = "2.11.0";
  r.fingerprint.gpus = 2;
  r.fingerprint.gpuModel = "NVIDIA H200";
  r.diskPath = "/ckpt";
  r.diskFreeBytes = 5ull << 30;
  r.clock = ClockOffset{3, 1};
  r.port = PortProbe{"10.0.0.1:4000", true, "1 ms"};
  return r;
}

using Reports = std::vector<std::optional<NodeReport>>;

std::vector<PreflightFlag> flagsOf(const Reports& reports) {
  return evaluatePreflight(reports, PreflightLimits{std::chrono::milliseconds(1000),
                                                    std::chrono::milliseconds(10000)});
}

std::vector<PreflightCheck> checksOf(const std::vector<PreflightFlag>& flags) {
  std::vector<PreflightCheck> out;
  for (const auto& f : flags) out.push_back(f.check);
  return out;
}

}  // namespace

TEST_CASE("healthy nodes raise no flag", "[unit][preflight]") {
  Reports reports{healthy("a"), healthy("b"), healthy("c")};
  reports[0]->clock.reset();  // node rank 0 is the reference
  reports[2]->fingerprint.kernel = "6.2.0";           // shown, not compared
  reports[2]->fingerprint.gpuModel = "NVIDIA A100";  // shown, not compared
  CHECK(flagsOf(reports).empty());
}

TEST_CASE("a version that differs between nodes is a version flag naming the nodes",
          "[unit][preflight]") {
  Reports reports{healthy("a"), healthy("b"), healthy("c")};
  reports[1]->fingerprint.torch = "9.9";
  reports[2]->fingerprint.nccl = "2.18.1";
  const auto flags = flagsOf(reports);
  REQUIRE(checksOf(flags) == std::vector<PreflightCheck>{PreflightCheck::kVersion, PreflightCheck::kVersion});
  CHECK_THAT(flags[0].line, Contains("torch differs") && Contains("2.11.0 on nodes 0,2") &&
                                Contains("9.9 on node 1"));
  CHECK_THAT(flags[1].line, Contains("NCCL differs") && Contains("2.18.1 on node 2"));
}

TEST_CASE("clock skew is flagged only when it is certain beyond the error bound",
          "[unit][preflight]") {
  Reports reports{healthy("a"), healthy("b"), healthy("c"), healthy("d")};
  reports[1]->clock = ClockOffset{5000, 2};    // 5 s ahead: certain
  reports[2]->clock = ClockOffset{-1500, 20};  // 1.5 s behind: certain
  reports[3]->clock = ClockOffset{1400, 500};  // could be 900 ms: not certain
  const auto flags = flagsOf(reports);
  REQUIRE(checksOf(flags) == std::vector<PreflightCheck>{PreflightCheck::kClock, PreflightCheck::kClock});
  CHECK_THAT(flags[0].line, Contains("node 1 (b)") && Contains("5.0 s ahead") && Contains("NTP"));
  CHECK_THAT(flags[1].line, Contains("node 2 (c)") && Contains("1.5 s behind"));
}

TEST_CASE("fewer GPUs than workers, or none where others have some, is a gpus flag",
          "[unit][preflight]") {
  Reports reports{healthy("a"), healthy("b"), healthy("c")};
  reports[1]->fingerprint.gpus = 1;  // 2 workers
  reports[2]->fingerprint.gpus = 0;  // a broken driver
  const auto flags = flagsOf(reports);
  REQUIRE(checksOf(flags) == std::vector<PreflightCheck>{PreflightCheck::kGpus, PreflightCheck::kGpus});
  CHECK_THAT(flags[0].line, Contains("node 1 (b) has 1 GPU(s) for 2 workers"));
  CHECK_THAT(flags[1].line, Contains("node 2 (c) sees no GPU while node 0 sees 2"));
}

TEST_CASE("CPU-only nodes raise no gpus flag", "[unit][preflight]") {
  Reports reports{healthy("a"), healthy("b")};
  for (auto& r : reports) r->fingerprint.gpus = 0;
  CHECK(flagsOf(reports).empty());
}

TEST_CASE("a node that cannot reach the worker store, and a missing report, are flagged",
          "[unit][preflight]") {
  Reports reports{healthy("a"), healthy("b"), std::nullopt};
  reports[1]->port = PortProbe{"10.0.0.1:4000", false, "timed out after 2000 ms"};
  const auto flags = flagsOf(reports);
  REQUIRE(checksOf(flags) == std::vector<PreflightCheck>{PreflightCheck::kPort, PreflightCheck::kMissing});
  CHECK_THAT(flags[0].line, Contains("node 1 (b) cannot connect to the worker store 10.0.0.1:4000") &&
                                Contains("timed out after 2000 ms"));
  CHECK_THAT(flags[1].line, Contains("node 2 sent no preflight report within 10000 ms"));
}

TEST_CASE("the nodes a strict preflight blames: only when every flag blames some",
          "[unit][preflight][exclusion]") {
  Reports reports{healthy("a"), healthy("b"), healthy("c"), healthy("d")};
  reports[1]->port = PortProbe{"10.0.0.1:4000", false, "refused"};
  reports[3]->clock = ClockOffset{5000, 2};
  reports[2]->fingerprint.gpus = 0;
  auto flags = flagsOf(reports);
  REQUIRE(flags.size() == 3);
  CHECK(blamedNodes(flags) == std::vector<int>{1, 2, 3});
  // A version that differs blames no node by itself: nobody may leave for it.
  reports[2]->fingerprint.torch = "9.9";
  CHECK(blamedNodes(flagsOf(reports)).empty());
  // Nor does a missing report (nobody is there to act on it).
  CHECK(blamedNodes(flagsOf({healthy("a"), std::nullopt})).empty());
  CHECK(blamedNodes({}).empty());
}

TEST_CASE("the table has one row per node and the flags below it", "[unit][preflight]") {
  Reports reports{healthy("alpha"), healthy("b"), std::nullopt};
  reports[0]->clock.reset();
  reports[1]->clock = ClockOffset{-250, 4};
  reports[1]->port = PortProbe{"10.0.0.1:4000", false, "refused"};
  reports[1]->addr = "10.0.0.2";
  const auto flags = flagsOf(reports);
  const std::string table = formatPreflightTable(7, reports, flags);
  CHECK_THAT(table, Contains("preflight of generation 7: 3 node(s), 2 flag(s)"));
  CHECK_THAT(table, Contains("\n  0     alpha ") && Contains(" 0.1.0 "));
  CHECK_THAT(table, Contains("reference") && Contains("-250 ms +-4") && Contains("5.0 GiB /ckpt"));
  CHECK_THAT(table, Contains("2 x NVIDIA H200") && Contains("CLOSED 10.0.0.1:4000 (refused)"));
  CHECK_THAT(table, Contains("\n  1     b 10.0.0.2 ") && Contains("\n  2     (no report)"));
  CHECK_THAT(table, Contains("\n  FLAG port: node 1 (b, 10.0.0.2) cannot") && Contains("\n  FLAG missing: node 2"));
}

TEST_CASE("reports and verdicts survive their JSON; bad records are protocol errors",
          "[unit][preflight]") {
  NodeReport r = healthy("b");
  r.addr = "10.0.0.2";
  r.diskFreeBytes.reset();
  const NodeReport back = reportFromJson(toJson(r));
  CHECK(back.host == "b");
  CHECK(back.addr == "10.0.0.2");
  CHECK(back.fingerprint.torch == "2.11.0");
  CHECK(back.fingerprint.gpus == 2);
  CHECK_FALSE(back.diskFreeBytes);
  REQUIRE(back.clock);
  CHECK(back.clock->offsetMs == 3);
  CHECK(back.clock->errorMs == 1);
  CHECK(back.port.target == "10.0.0.1:4000");
  const PreflightVerdict v = verdictFromJson(toJson(PreflightVerdict{true, 2, "port: node 1", {1, 3}}));
  CHECK(v.failed);
  CHECK(v.flags == 2);
  CHECK(v.firstFlag == "port: node 1");
  CHECK(v.blamed == std::vector<int>{1, 3});
  // An older leader's verdict blames nobody.
  CHECK(verdictFromJson(R"({"failed":true,"flags":1,"first":"x"})").blamed.empty());
  CHECK_THROWS_AS(reportFromJson("{"), ProtocolError);
  CHECK_THROWS_AS(reportFromJson(R"({"host":"x"})"), ProtocolError);
  CHECK_THROWS_AS(verdictFromJson("[]"), ProtocolError);
}
