#include "launcher/status/status_http.hpp"

#include "ddp_version.hpp"
#include "rendezvous/algorithm/detail/rendezvous_keys.hpp"
#include "rendezvous/http/http_metrics.hpp"

namespace ddp {
namespace {

using Clock = std::chrono::steady_clock;

constexpr std::chrono::milliseconds kBudget{2000};
constexpr std::chrono::milliseconds kReuse{500};

// readJob() over a store connection; a key's age runs from when its value was first seen.
class StoreSource final : public KeySource {
 public:
  using Seen = std::map<std::string, std::pair<std::string, Clock::time_point>>;
  StoreSource(Store& store, Seen& seen) : store_(store), seen_(seen), now_(Clock::now()) {}

  std::optional<std::string> get(const std::string& key) override {
    return detail::peek(store_, key);
  }

  std::optional<double> secondsSinceChange(const std::string& key,
                                           const std::string& value) override {
    auto [it, inserted] = seen_.try_emplace(key, value, now_);
    if (!inserted && it->second.first != value) it->second = {value, now_};
    return std::chrono::duration<double>(now_ - it->second.second).count();
  }

 private:
  Store& store_;
  Seen& seen_;
  Clock::time_point now_;
};

}  // namespace

AgentStatusPages::AgentStatusPages(StoreConnector connect, std::string runId, std::string host,
                                   HttpServerOptions http)
    : connect_(std::move(connect)), runId_(std::move(runId)), host_(std::move(host)) {
  http_ = std::make_unique<HttpServer>(std::move(http), [this](const std::string& target) {
    return routeStatus(target, [this] { return read(); });
  });
}

AgentStatusPages::~AgentStatusPages() { http_.reset(); }

uint16_t AgentStatusPages::port() const { return http_->port(); }

std::string AgentStatusPages::address() const { return http_->address(); }

StatusContent AgentStatusPages::read() {
  if (last_ && Clock::now() - lastAt_ < kReuse) return *last_;
  try {
    if (!store_) {
      store_ = connect_(kBudget);
      store_->setTimeout(kBudget);
    }
    StoreSource source(*store_, seen_);
    StatusContent content;
    content.jobs.push_back(readJob(source, runId_));
    content.server = {{"name", "ddprun agent"}, {"version", DDP_VERSION_STRING}, {"host", host_}};
    content.storeMetrics = processMetricsText(processFigures());  // descriptors open and allowed
    last_ = std::move(content);
    lastAt_ = Clock::now();
    return *last_;
  } catch (...) {
    store_.reset();  // reconnect on the next request
    throw;
  }
}

}  // namespace ddp
