// ServerCore: what every connection of one StoreServer shares — the options, the memory budget,
// the store, the rate limit of client-provoked warnings, the open sessions, the counters that
// StoreServer::stats() reports and the StoreStats that StoreServer::snapshot() copies, and the
// transport and admission state (the TLS context, connections still in their TLS handshake, the
// log of refused clients, the owner lookup of local peers, the tracker of connections that have not
// presented the token yet; admission.hpp). Owned by the server and kept alive by its sessions.
//
// Thread safety: everything is owned by the server's io_context thread, except `counters` and the
// budget's used()/peak(), which other threads may read (relaxed atomics, one writer).
#pragma once

#include <atomic>
#include <cstdint>
#include <memory>
#include <string>
#include <unordered_set>

#include <spdlog/logger.h>

#include <boost/asio/any_io_executor.hpp>

#include "rendezvous/server/detail/journal.hpp"
#include "rendezvous/server/detail/memory_budget.hpp"
#include "rendezvous/server/detail/refusal_log.hpp"
#include "rendezvous/server/detail/store_state.hpp"
#include "rendezvous/server/detail/unauthenticated.hpp"
#include "rendezvous/server/detail/warning_limiter.hpp"
#include "rendezvous/server/store_server.hpp"
#include "rendezvous/server/store_stats.hpp"

namespace boost::asio::ssl {
class context;  // <boost/asio/ssl/context.hpp> where it is used (admission, store_server)
}  // namespace boost::asio::ssl

namespace ddp::detail {

class StoreSession;
class TlsAdmission;

// Monotonic counters and gauges, written by the io_context thread only.
struct ServerCounters {
  std::atomic<uint64_t> accepted{0};
  std::atomic<uint64_t> refused{0};          // past --max-connections
  std::atomic<uint64_t> outOfDescriptors{0};  // accepts that failed for want of a descriptor
  std::atomic<uint64_t> unauthenticatedClosed{0};  // UnauthenticatedConnections::closed()
  std::atomic<uint64_t> unauthenticatedOpen{0};    // gauge: UnauthenticatedConnections::size()
  std::atomic<uint64_t> closedBadInput{0};   // malformed input, ADD/BARRIER misuse or overflow
  std::atomic<uint64_t> closedMemory{0};     // the memory budget refused a request
  std::atomic<uint64_t> requests{0};
  std::atomic<uint64_t> warningsSuppressed{0};
  std::atomic<uint64_t> open{0};
  std::atomic<uint64_t> keys{0};
};

// Increments / decrements a counter that only one thread writes.
inline void bump(std::atomic<uint64_t>& counter, uint64_t by = 1) {
  counter.store(counter.load(std::memory_order_relaxed) + by, std::memory_order_relaxed);
}
inline void drop(std::atomic<uint64_t>& gauge) {
  gauge.store(gauge.load(std::memory_order_relaxed) - 1, std::memory_order_relaxed);
}

struct ServerCore {
  // Resolves options.maxConnections 0 to connectionRoom() of the descriptor limit; with a token,
  // starts the bounds on unauthenticated connections (timers on `io`).
  ServerCore(StoreServerOptions opts, boost::asio::any_io_executor io);

  // Logs a warning a client provoked (bad input, a refused connection), rate-limited: at most
  // 10 per 10 s, then one line with the count of what was suppressed.
  void warn(const std::string& message);
  // Logs what warn() still holds back (when the server stops).
  void flushWarnings();
  ServerStats stats() const;
  // Durability (--data-dir): replays the data directory into `state` and journals from then on.
  // Throws ConfigError (see Journal). A no-op without options.durability.dataDir.
  void openJournal(boost::asio::any_io_executor io);
  // After requests were applied: ends the journal record of their changes (and compacts when
  // due). A no-op without a journal.
  void commitChanges() {
    if (!journal) return;
    journal->commit();
    if (journal->compactionDue()) journal->compact(state.snapshot());
  }

  // options.maxConnections was 0: the connection limit comes from the descriptor limit.
  bool connectionLimitAuto;
  StoreServerOptions options;
  MemoryBudget budget;  // declared before everything charged to it, so destroyed after it
  StoreState state;
  std::unique_ptr<Journal> journal;  // with --data-dir only
  WarningLimiter warnings;
  std::shared_ptr<spdlog::logger> log;
  std::unordered_set<StoreSession*> sessions;
  ServerCounters counters;
  StoreStats storeStats;  // what the status pages show (StoreServer::snapshot); io thread only
  bool stopped = false;
  uint64_t nextSessionId = 1;
  // Transport and admission (admission.hpp): the TLS context when options.tls is enabled,
  // connections still in their TLS handshake (they count toward maxConnections), the
  // rate-limited log of refused clients.
  std::shared_ptr<boost::asio::ssl::context> tls;
  std::unordered_set<TlsAdmission*> handshaking;
  RefusalLog refusals;
  // Who owns a local connection (admission.hpp); set when the options need to know.
  std::shared_ptr<PeerOwnerLookup> peerOwners;
  // With a token: the connections that have not presented it yet (unauthenticated.hpp).
  std::unique_ptr<UnauthenticatedConnections> unauthenticated;
  // The soft RLIMIT_NOFILE at construction (for "out of descriptors" lines).
  uint64_t fdLimit = 0;
  // Refreshes counters.unauthenticated* from the tracker (after it changed).
  void countUnauthenticated();
};

}  // namespace ddp::detail
