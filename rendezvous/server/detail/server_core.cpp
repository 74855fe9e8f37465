#include "rendezvous/server/detail/server_core.hpp"

#include "rendezvous/base/logging.hpp"

namespace ddp::detail {

namespace {

std::size_t budgetOf(const StoreServerOptions& options) {
  return options.maxMemoryBytes > 0 ? options.maxMemoryBytes : defaultMemoryBudget();
}

}  // namespace

ServerCore::ServerCore(StoreServerOptions opts)
    : options(std::move(opts)), budget(budgetOf(options)), state(budget), log(logger("store")) {}

void ServerCore::warn(const std::string& message) {
  if (const auto suffix = warnings.admit(WarningLimiter::Clock::now())) {
    log->warn("{}: {}{}", options.name, message, *suffix);
  } else {
    bump(counters.warningsSuppressed);
  }
}

void ServerCore::flushWarnings() {
  if (const uint64_t n = warnings.takeSuppressed(); n > 0) {
    log->warn("{}: {} similar warning{} suppressed since the last one", options.name, n,
              n == 1 ? "" : "s");
  }
}

ServerStats ServerCore::stats() const {
  auto get = [](const std::atomic<uint64_t>& v) { return v.load(std::memory_order_relaxed); };
  ServerStats s;
  s.connectionsAccepted = get(counters.accepted);
  s.connectionsOpen = get(counters.open);
  s.connectionsRefused = get(counters.refused);
  s.closedBadInput = get(counters.closedBadInput);
  s.closedMemory = get(counters.closedMemory);
  s.requests = get(counters.requests);
  s.warningsSuppressed = get(counters.warningsSuppressed);
  s.keys = get(counters.keys);
  s.memoryUsed = budget.used();
  s.memoryPeak = budget.peak();
  s.memoryLimit = budget.limit();
  return s;
}

}  // namespace ddp::detail
