// Metric points in the worker store: the writer's two calls, the reader's batches, the ring.
#include <catch2/catch.hpp>

#include "rendezvous/store/in_memory_store.hpp"
#include "rendezvous/store/metric_points.hpp"
#include "rendezvous/store/worker_store_keys.hpp"

using ddp::InMemoryStore;
using ddp::MetricPointReader;

TEST_CASE("points written are read once, in order, with their numbers", "[unit]") {
  InMemoryStore store;
  MetricPointReader reader;
  CHECK(reader.readNew(store).empty());
  CHECK(ddp::writeMetricPoint(store, R"({"step":1,"loss":0.5})") == 1);
  CHECK(ddp::writeMetricPoint(store, "{}") == 2);
  const auto points = reader.readNew(store);
  REQUIRE(points.size() == 2);
  CHECK(points[0] == R"({"n":1,"step":1,"loss":0.5})");
  CHECK(points[1] == R"({"n":2})");
  CHECK(reader.readNew(store).empty());
  CHECK(ddp::metricPointNumber(points[1]) == 2);
}

TEST_CASE("the worker store keeps a ring of 64; a reader that fell behind skips", "[unit]") {
  InMemoryStore store;
  MetricPointReader reader;
  for (int i = 0; i < 100; ++i) ddp::writeMetricPoint(store, "{\"step\":" + std::to_string(i) + "}");
  const auto points = reader.readNew(store);
  REQUIRE(points.size() == static_cast<std::size_t>(ddp::kMetricPointSlots));
  CHECK(ddp::metricPointNumber(points.front()) == 37);
  CHECK(ddp::metricPointNumber(points.back()) == 100);
  CHECK(reader.skipped() == 36);
  CHECK(store.numKeys() == ddp::kMetricPointSlots + 1);
}

TEST_CASE("a point whose number was taken but not yet written is read next time", "[unit]") {
  InMemoryStore store;
  MetricPointReader reader;
  ddp::writeMetricPoint(store, R"({"step":1})");
  store.add(ddp::metricPointCountKey(), 1);  // a writer between its ADD and its SET
  auto points = reader.readNew(store);
  REQUIRE(points.size() == 1);
  store.set(ddp::metricPointKey(2), R"({"n":2,"step":2})");
  points = reader.readNew(store);
  REQUIRE(points.size() == 1);
  CHECK(ddp::metricPointNumber(points[0]) == 2);
}

TEST_CASE("a point that is not an object or too long is refused", "[unit]") {
  InMemoryStore store;
  CHECK_THROWS_AS(ddp::writeMetricPoint(store, "[1]"), std::invalid_argument);
  CHECK_THROWS_AS(ddp::writeMetricPoint(store, "{\"x\":\"" + std::string(2000, 'a') + "\"}"),
                  std::invalid_argument);
}
