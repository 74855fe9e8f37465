// Metric points: how a job's training metrics reach ddprun's status page (docs/status.md).
// Workers know only their worker store (MASTER_ADDR:MASTER_PORT), which node rank
// 0's agent hosts in-process, fresh for each generation; so rank 0 of the training writes its
// points there and that agent relays them into the rendezvous store, where ddprund and the
// agents' own pages read them (launcher/status/status_publisher.hpp keeps the job's ring of 256).
//
// In the worker store (worker_store_keys.hpp):
//   /ddp/metrics/n          ADD counter: the newest point's number n (1, 2, ...)
//   /ddp/metrics/<n % 64>   point n: one JSON object of at most 1 KiB, {"n": n, "step": ...,
//                           "loss": ..., "samples_per_s": ...} (also "epoch", "lr"; numbers)
// A writer takes n = ADD(n, 1), then SETs slot n % 64 to the object with "n": n — two round
// trips, in torch's Python API too (store.add("ddp/metrics/n", 1), store.set(...): torch's Store
// sends "/" + key, so its names lack the leading '/'). The worker store thus holds at most 65
// such keys however long the job runs, with or without a reader.
//
// Thread safety: the functions use the given Store only; a MetricPointReader is used by one
// thread.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "rendezvous/store/store.hpp"

namespace ddp {

// Most bytes of one point.
inline constexpr std::size_t kMaxMetricPointBytes = 1024;

// Writes `fields` (a JSON object, "{...}", without "n") as the next point; returns its number.
// Throws std::invalid_argument when `fields` is not an object or too long, and what the store
// throws.
int64_t writeMetricPoint(Store& store, const std::string& fields);

// Reads the points of one worker store that are new since the last call.
class MetricPointReader {
 public:
  // The new points, oldest first, as written (JSON objects with "n"); points overwritten before
  // they were read are skipped (counted in skipped()). A slot whose point is not written yet
  // ends the batch: it is read next time. Throws what the store throws.
  std::vector<std::string> readNew(Store& store);
  int64_t skipped() const { return skipped_; }

 private:
  int64_t seen_ = 0;
  int64_t skipped_ = 0;
};

// The "n" of a point; -1 when it has none.
int64_t metricPointNumber(const std::string& point);

}  // namespace ddp
