#include "rendezvous/http/http_ddprund.hpp"

#include <algorithm>
#include <future>
#include <unordered_map>

#include "ddp_version.hpp"
#include "rendezvous/http/http_metrics.hpp"
#include "rendezvous/http/http_status_routes.hpp"
#include "rendezvous/store/rendezvous_key_names.hpp"

namespace ddp {
namespace {

using Clock = std::chrono::steady_clock;

constexpr std::chrono::milliseconds kMinInterval{250};
constexpr int kCostFactor = 50;  // at most 1/50 of the io thread's time
constexpr std::chrono::seconds kSnapshotWait{2};
constexpr std::size_t kSnapshotBudget = 64u << 20;

// readJob() over a snapshot's copy of the rdzv/ keys.
class SnapshotSource final : public KeySource {
 public:
  explicit SnapshotSource(const StoreSnapshot& s) : snapshot_(s), now_(Clock::now()) {
    values_.reserve(s.entries.size());
    for (const auto& [key, value] : s.entries) values_.emplace(key, &value);
  }

  std::optional<std::string> get(const std::string& key) override {
    const auto it = values_.find(key);
    if (it == values_.end()) return std::nullopt;
    return *it->second;
  }

  std::optional<double> secondsSinceChange(const std::string& key, const std::string&) override {
    const auto it = snapshot_.heartbeatTimes.find(key);
    if (it == snapshot_.heartbeatTimes.end()) return std::nullopt;
    return std::chrono::duration<double>(now_ - it->second).count();
  }

  std::vector<std::string> runIds() const {
    std::vector<std::string> ids;
    for (const auto& [key, value] : snapshot_.entries) {
      if (const auto id = runIdOfIncarnationKey(key)) ids.emplace_back(*id);
    }
    std::sort(ids.begin(), ids.end());
    return ids;
  }

 private:
  const StoreSnapshot& snapshot_;
  Clock::time_point now_;
  std::unordered_map<std::string, const std::string*> values_;
};

}  // namespace

DdprundStatus::DdprundStatus(StoreServer& store, HttpServerOptions http) : store_(store) {
  http_ = std::make_unique<HttpServer>(std::move(http),
                                       [this](const std::string& target) { return handle(target); });
}

DdprundStatus::~DdprundStatus() { http_.reset(); }

uint16_t DdprundStatus::port() const { return http_->port(); }

std::string DdprundStatus::address() const { return http_->address(); }

std::shared_ptr<const StoreSnapshot> DdprundStatus::snapshot() {
  if (last_) {
    const auto interval = std::max<Clock::duration>(kMinInterval, last_->cost * kCostFactor);
    if (Clock::now() - last_->takenAt < interval) return last_;
  }
  auto promise = std::make_shared<std::promise<StoreSnapshot>>();
  auto future = promise->get_future();
  store_.snapshot(kSnapshotBudget,
                  [promise](StoreSnapshot s) { promise->set_value(std::move(s)); });
  if (future.wait_for(kSnapshotWait) == std::future_status::ready) {
    last_ = std::make_shared<const StoreSnapshot>(future.get());
  } else if (!last_) {
    throw std::runtime_error("the store did not answer within 2 s");
  }
  return last_;
}

HttpReply DdprundStatus::handle(const std::string& target) {
  return routeStatus(target, [this] {
    const auto snap = snapshot();
    SnapshotSource source(*snap);
    StatusContent content;
    for (const auto& runId : source.runIds()) content.jobs.push_back(readJob(source, runId));
    const auto uptime = std::chrono::duration<double>(Clock::now() - started_).count();
    content.server = {{"name", "ddprund"},
                      {"version", DDP_VERSION_STRING},
                      {"uptime_s", std::round(uptime)},
                      {"connections", snap->connections},
                      {"connections_max", snap->connectionLimit},
                      {"keys", snap->keys},
                      {"truncated", snap->truncated}};
    content.storeMetrics = storeMetricsText(*snap, processFigures());
    return content;
  });
}

}  // namespace ddp
