#include "rendezvous/server/detail/server_core.hpp"

#include <algorithm>

#include "rendezvous/base/fd_limit.hpp"
#include "rendezvous/base/logging.hpp"

namespace ddp::detail {

namespace {

std::size_t budgetOf(const StoreServerOptions& options) {
  return options.maxMemoryBytes > 0 ? options.maxMemoryBytes : defaultMemoryBudget();
}

// The options with their defaults resolved against this process's descriptor limit.
StoreServerOptions resolved(StoreServerOptions options, uint64_t fdLimit) {
  if (options.maxConnections == 0) options.maxConnections = connectionRoom(fdLimit);
  if (options.maxUnauthenticated == 0) {
    options.maxUnauthenticated = std::max<std::size_t>(1, options.maxConnections / 2);
  }
  return options;
}

bool needsOwners(const StoreServerOptions& o) {
  return o.otherLocalUsers != StoreServerOptions::OtherLocalUsers::kServe || !o.token.empty();
}

}  // namespace

ServerCore::ServerCore(StoreServerOptions opts, boost::asio::any_io_executor io)
    : connectionLimitAuto(opts.maxConnections == 0),
      options(resolved(std::move(opts), currentFdLimit().soft)),
      budget(budgetOf(options)),
      state(budget),
      log(logger("store")),
      fdLimit(currentFdLimit().soft) {
  if (needsOwners(options)) {
    peerOwners = options.peerOwners ? options.peerOwners : std::make_shared<PeerOwnerLookup>();
  }
  if (!options.token.empty()) {
    unauthenticated = std::make_unique<UnauthenticatedConnections>(
        std::move(io), UnauthenticatedConnections::Limits{options.helloTimeout,
                                                          options.maxUnauthenticatedPerPeer,
                                                          options.maxUnauthenticated});
  }
}

void ServerCore::countUnauthenticated() {
  if (!unauthenticated) return;
  counters.unauthenticatedOpen.store(unauthenticated->size(), std::memory_order_relaxed);
  counters.unauthenticatedClosed.store(unauthenticated->closed(), std::memory_order_relaxed);
}


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
  s.outOfDescriptors = get(counters.outOfDescriptors);
  s.unauthenticatedClosed = get(counters.unauthenticatedClosed);
  s.unauthenticatedOpen = get(counters.unauthenticatedOpen);
  s.connectionLimit = options.maxConnections;
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
