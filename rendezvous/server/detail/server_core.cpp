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

void ServerCore::openJournal(boost::asio::any_io_executor io) {
  if (options.durability.dataDir.empty()) return;
  journal = std::make_unique<Journal>(options.durability, std::move(io), log);
  const uint64_t records = journal->replay([&](const Mutation& m) { return state.replay(m); });
  journal->start(state.snapshot());
  state.attachJournal(journal.get());
  counters.keys.store(state.numKeys(), std::memory_order_relaxed);
  log->info("{}: data directory {}: {} records replayed, {} keys, {} client request ids",
            options.name, options.durability.dataDir, records, state.numKeys(),
            state.requestIds());
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
