// What the agent publishes for the status pages: records, history entries with root causes, the
// metric ring.
#include <catch2/catch.hpp>

#include <csignal>
#include <nlohmann/json.hpp>

#include "launcher/status/node_status.hpp"
#include "launcher/status/status_publisher.hpp"
#include "rendezvous/store/in_memory_store.hpp"

using nlohmann::json;

namespace {

// The generations of a history's entries, in order.
std::vector<int64_t> generations(const std::string& history) {
  std::vector<int64_t> out;
  for (const auto& line : ddp::splitLines(history)) {
    out.push_back(json::parse(line)["generation"].get<int64_t>());
  }
  return out;
}

ddp::WorkerFailure failure(int rank, int exitCode, int64_t seq, const std::string& message) {
  ddp::WorkerFailure f;
  f.rank = rank;
  f.host = "n" + std::to_string(rank);
  f.pid = 100 + rank;
  f.exitCode = exitCode;
  f.failureSeq = seq;
  f.seqByWorker = true;
  f.message = message;
  return f;
}

}  // namespace

TEST_CASE("a node record names each worker's state and exit", "[unit]") {
  ddp::NodeStatus s;
  s.generation = 2;
  s.nodeRank = 1;
  s.maxRestarts = 3;
  s.workers = {{{.rank = 2, .localRank = 0}, 11, false, 0, false},
               {{.rank = 3, .localRank = 1}, 12, true, 0, false},        // exited 0
               {{.rank = 4, .localRank = 2}, 13, true, 1 << 8, false},   // exited 1 by itself
               {{.rank = 5, .localRank = 3}, 14, true, SIGTERM, true}};  // stopped by ddprun
  const json record = json::parse(ddp::nodeStatusJson(s));
  CHECK(record["generation"] == 2);
  CHECK(record["max_restarts"] == 3);
  CHECK(record["ended"].is_null());
  const auto& w = record["workers"];
  CHECK(w[0]["state"] == "running");
  CHECK(w[1]["state"] == "succeeded");
  CHECK(w[2]["state"] == "failed");
  CHECK(w[2]["exit_code"] == 1);
  CHECK(w[3]["state"] == "stopped");
  CHECK(w[3]["signal"] == "SIGTERM");
}

TEST_CASE("a history entry names the summary's root cause, not the first reporter", "[unit]") {
  // Node 1 reported first with a collateral communication error numbered after node 0's fault.
  ddp::FailureRecord collateral{4, 1, "n1", {failure(1, 3, 2, "ddp::CommError: gloo allreduce")}};
  ddp::FailureRecord cause{4, 0, "n0", {failure(0, 1, 1, "ValueError: bad batch\nmore")}};
  ddp::FailureRecord older{3, 0, "n0", {failure(0, 7, 1, "older")}};
  ddp::GenerationEnd end{4, 2, 4, 1, "restart", "workers failed on node rank 1"};
  const json entry = json::parse(ddp::historyEntryJson(end, {collateral, older, cause}));
  CHECK(entry["generation"] == 4);
  CHECK(entry["end"] == "restart");
  CHECK(entry["root_cause"] == "rank 0 on n0 (pid 100) exited with 1: ValueError: bad batch");
  const json none = json::parse(ddp::historyEntryJson({5, 2, 4, 1, "scale-up", ""}, {cause}));
  CHECK(none["root_cause"].is_null());
}

TEST_CASE("history keeps one entry per generation, the newest 32", "[unit]") {
  std::string history;
  for (int g = 0; g < 40; ++g) {
    history = ddp::appendHistory(history, ddp::historyEntryJson({g, 1, 1, 0, "restart", ""}, {}));
  }
  history = ddp::appendHistory(history, ddp::historyEntryJson({39, 1, 1, 0, "succeeded", ""}, {}));
  const auto lines = ddp::splitLines(history);
  REQUIRE(lines.size() == ddp::kHistoryEntries);
  CHECK(json::parse(lines.front())["generation"] == 8);
  CHECK(json::parse(lines.back())["end"] == "succeeded");
}

TEST_CASE("a late entry of an older generation goes in generation order", "[unit]") {
  std::string history;
  for (int g : {0, 2, 3}) {
    history = ddp::appendHistory(history, ddp::historyEntryJson({g, 1, 1, 0, "restart", ""}, {}));
  }
  history = ddp::appendHistory(history, ddp::historyEntryJson({1, 1, 1, 0, "peer lost", ""}, {}));
  CHECK(generations(history) == std::vector<int64_t>{0, 1, 2, 3});
}

TEST_CASE("node rank 0 adds every generation it took part in that the history lacks", "[unit]") {
  // This node was node rank 1 in generations 0 and 1; the node rank 0 of generation 1, which
  // would have written generation 0's entry, died first. As node rank 0 of generation 2 this node
  // writes both.
  ddp::InMemoryStore store;
  ddp::StatusPublisherSettings settings{"hist", "n1", 3, [&store](std::chrono::milliseconds) {
                                          return std::unique_ptr<ddp::Store>(store.newHandle());
                                        }};
  ddp::StatusPublisher publisher(settings);
  auto round = [](int64_t g, int nodeRank) {
    ddp::RendezvousResult r;
    r.generation = g;
    r.nodeRank = nodeRank;
    r.nodeCount = 2;
    r.worldSize = 2;
    return r;
  };
  publisher.beginGeneration(round(0, 1), "", 0);
  publisher.endGeneration("restart", "rank 0 failed");
  publisher.beginGeneration(round(1, 1), "", 0);
  publisher.endGeneration("peer lost", "node rank 0 died");
  publisher.beginGeneration(round(2, 0), "", 0);
  publisher.endGeneration("succeeded", "every worker exited 0");
  publisher.finish();
  CHECK(generations(store.get("rdzv/hist/0/history")) == std::vector<int64_t>{0, 1, 2});
}

TEST_CASE("the ring keeps numeric fields, the generation, and the newest 256", "[unit]") {
  const auto point = ddp::ringPoint(R"({"n":3,"step":30,"loss":0.5,"name":"<b>","lr":"x"})", 2);
  REQUIRE(point);
  CHECK(json::parse(*point) == json({{"gen", 2}, {"n", 3}, {"step", 30}, {"loss", 0.5}}));
  CHECK_FALSE(ddp::ringPoint("not json", 2));
  std::deque<std::string> ring;
  for (int i = 0; i < 300; ++i) ddp::pushRing(ring, std::to_string(i));
  CHECK(ring.size() == ddp::kMetricRingPoints);
  CHECK(ring.front() == "44");
}
