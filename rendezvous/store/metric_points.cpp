#include "rendezvous/store/metric_points.hpp"

#include <algorithm>
#include <charconv>
#include <stdexcept>

#include "rendezvous/store/worker_store_keys.hpp"

namespace ddp {

int64_t writeMetricPoint(Store& store, const std::string& fields) {
  if (fields.size() < 2 || fields.front() != '{' || fields.back() != '}') {
    throw std::invalid_argument("a metric point is a JSON object");
  }
  constexpr std::size_t kNumberRoom = 32;  // {"n":<up to 20 digits>,
  if (fields.size() + kNumberRoom > kMaxMetricPointBytes) {
    throw std::invalid_argument("a metric point is at most 1 KiB");
  }
  const int64_t n = store.add(metricPointCountKey(), 1);
  std::string point = "{\"n\":" + std::to_string(n);
  if (fields.size() > 2) point += ",";
  point.append(fields, 1);
  store.set(metricPointKey(n), point);
  return n;
}

int64_t metricPointNumber(const std::string& point) {
  constexpr std::string_view kField = "\"n\":";
  const auto at = point.find(kField);
  if (at == std::string::npos) return -1;
  std::size_t i = at + kField.size();
  while (i < point.size() && point[i] == ' ') ++i;
  int64_t n = -1;
  const auto r = std::from_chars(point.data() + i, point.data() + point.size(), n);
  return r.ec == std::errc() ? n : -1;
}

std::vector<std::string> MetricPointReader::readNew(Store& store) {
  std::vector<std::string> points;
  const int64_t newest = store.add(metricPointCountKey(), 0);
  if (newest <= seen_) return points;
  const int64_t first = std::max(seen_ + 1, newest - kMetricPointSlots + 1);
  skipped_ += first - (seen_ + 1);
  seen_ = first - 1;
  for (int64_t n = first; n <= newest; ++n) {
    const std::string key = metricPointKey(n);
    if (!store.check({key})) break;  // its writer has not set it yet
    std::string point = store.get(key);
    const int64_t found = metricPointNumber(point);
    if (found < n) break;   // still the older point of this slot: not written yet
    if (found > n) {        // overwritten already: we fell behind
      ++skipped_;
      seen_ = n;
      continue;
    }
    seen_ = n;
    points.push_back(std::move(point));
  }
  return points;
}

}  // namespace ddp
