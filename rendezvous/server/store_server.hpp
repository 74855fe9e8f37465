// StoreServer: a TCP key-value server speaking c10d's TCPStore wire protocol (all three dialects).
//
// It is what `ddprund` runs, what `ddprun --standalone` embeds as its rendezvous store, and what
// the group-rank-0 agent starts fresh for each restart generation as the *worker store*.
//
// Who it serves is decided per connection before anything is read (detail/admission.hpp): an
// address allowlist, optionally a rule for other users' local processes, optionally TLS,
// optionally a token that ddprun clients present in HELLO (detail/session_auth.hpp), with the
// connections that have not presented it yet bounded (detail/unauthenticated.hpp). The defaults
// serve everyone, in plain TCP, as torch's TCPStore does; ddprund and the agent narrow them
// (docs/security.md).
//
// Capacity: at most maxConnections connections, by default what the descriptor limit leaves. A
// connection past it, or one the process has no descriptor for, is told so with a busy notice
// (wire_codec.hpp) and closed; the server keeps one descriptor spare to do that, logs it
// (rate-limited) and counts it (ServerStats), and backs its accept loop off instead of spinning.
//
// Thread safety: all state is owned by the io_context the server runs on; call stop() from any
// thread (it posts to the io_context). StoreServerThread wraps a server in its own io_context and
// thread for embedding.
#pragma once

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include <boost/asio/io_context.hpp>

#include "rendezvous/security/address_allowlist.hpp"
#include "rendezvous/security/peer_owner.hpp"
#include "rendezvous/security/tls_options.hpp"
#include "rendezvous/server/durability.hpp"
#include "rendezvous/server/store_stats.hpp"
#include "rendezvous/wire/wire_codec.hpp"  // WireLimits, wire::LegacyDialect

namespace ddp {

struct StoreServerOptions {
  // Address to bind. "::" is dual-stack (IPv4 and IPv6).
  std::string host = "::";
  // Port to bind; 0 picks a free one (read it back with port()).
  uint16_t port = 0;
  // Per-request limits.
  WireLimits limits;
  // Memory the server may hold for its clients (stored keys and values, queues, waiters,
  // partially received requests, replies not yet written); 0 = detail::defaultMemoryBudget():
  // a quarter of RAM, at most half of RLIMIT_AS and of the cgroup's memory.max. A request that
  // would go past it is refused and its connection closed with a logged reason.
  std::size_t maxMemoryBytes = 0;
  // Most simultaneous connections; 0 = what the descriptor limit leaves: connectionRoom() of the
  // soft RLIMIT_NOFILE at construction (fd_limit.hpp). Further ones get a busy notice
  // (wire_codec.hpp: the client learns why) and are closed, with a rate-limited log line. So are
  // connections the process has no descriptor for (it keeps a spare one to say so).
  std::size_t maxConnections = 0;
  // Name used in log lines ("ddprund", "worker-store gen 3", ...).
  std::string name = "store";
  // How v1 (torch <= 2.1) connections are read; see wire_codec.hpp. kAuto tells 1.13 from 2.1 by
  // the opcodes a connection uses.
  wire::LegacyDialect legacyDialect = wire::LegacyDialect::kAuto;
  // kAuto only: how long a lone v1 opcode-8 request (1.13 DELETE_KEY or 2.1 APPEND?) waits for
  // more bytes before it is taken as a 1.13 DELETE_KEY. Paid at most once per connection.
  std::chrono::milliseconds v1AmbiguityGrace{20};
  // Keys the store holds from the moment it listens, before it serves anyone: an agent-hosted
  // rendezvous store carries its owner's run id (rendezvousOwnerKey()) so that an agent of
  // another run reaching it by mistake knows at once.
  std::vector<std::pair<std::string, std::string>> initialKeys;

  // ---- Who may connect (docs/security.md) -----------------------------------------------------
  // Peers whose address is outside this list are closed at once (a rate-limited warning says who
  // and why).
  AddressAllowlist allow = AddressAllowlist::any();
  // Processes of this machine running as another user than this process's, and not as root:
  // on one machine every user's process connects from 127.0.0.1 too, so addresses cannot tell
  // them apart (peer_owner.hpp asks the kernel who owns the other end).
  //   kServe         judged by address only, as torch's TCPStore does;
  //   kAuthenticate  served once they presented `token` in HELLO — allowUnauthenticated does not
  //                  cover them, and without a token they are refused (ddprund's default);
  //   kRefuse        closed at once (agent-hosted stores).
  enum class OtherLocalUsers { kServe, kAuthenticate, kRefuse };
  OtherLocalUsers otherLocalUsers = OtherLocalUsers::kServe;
  // Users whose local processes count as this user's (ddprund --allow-users).
  std::vector<uid_t> trustedUids;
  // When the kernel cannot say who owns a local connection (a kernel or sandbox without
  // sock_diag, a failed netlink call): false treats it as another user's process — security
  // never fails open — and logs why (rate-limited); true judges it by address only. Unused with
  // kServe.
  bool trustUnknownLocalOwner = false;
  // How owners are looked up; nullptr = the kernel (PeerOwnerLookup). Tests wrap it to fail.
  std::shared_ptr<PeerOwnerLookup> peerOwners;
  // When non-empty, a connection must present this token in ddprun's HELLO before any request
  // but VALIDATE/PING/HELLO, unless its address is in allowUnauthenticated. Never logged.
  std::string token;
  // Addresses served without a token (and, on a TLS server, without TLS): torch clients, which
  // never say HELLO. Empty: none.
  AddressAllowlist allowUnauthenticated;
  // With a token, connections that have not presented it yet are bounded, so that strangers
  // cannot crowd out the job's own clients (detail/unauthenticated.hpp):
  //   helloTimeout: closed when not authenticated within it (0: no deadline);
  //   maxUnauthenticatedPerPeer: at most this many at once from one local user (uid) or one
  //     remote address; more are refused at once;
  //   maxUnauthenticated: at most this many at once in all (0: half of the connection limit);
  //     past it the oldest is closed to make room (a real client authenticates within a round
  //     trip, a flood's connections sit idle).
  std::chrono::milliseconds helloTimeout{10000};
  std::size_t maxUnauthenticatedPerPeer = 64;
  std::size_t maxUnauthenticated = 0;
  // TLS (tls_options.hpp): on when tls.certFile is set; with tls.caFile clients need a
  // certificate signed by it.
  TlsServerOptions tls;
  // Where the data survives a restart of the server (ddprund --data-dir); default: nowhere.
  // With a data directory a reply is released only once the changes before it are durable.
  DurabilityOptions durability;
};

// Counters of a running server (for /metrics and logs). Monotonic unless noted.
struct ServerStats {
  uint64_t connectionsAccepted = 0;
  uint64_t connectionsOpen = 0;      // gauge
  uint64_t connectionsRefused = 0;   // past maxConnections
  uint64_t outOfDescriptors = 0;     // accepts that failed for want of a file descriptor
  uint64_t unauthenticatedClosed = 0;  // no token in time, over a per-peer cap, or evicted
  uint64_t unauthenticatedOpen = 0;  // gauge: connections that have not presented the token yet
  std::size_t connectionLimit = 0;   // maxConnections in effect (its default resolved)
  uint64_t closedBadInput = 0;       // malformed input, ADD/BARRIER on a non-number or overflowing
  uint64_t closedMemory = 0;         // a request the memory budget could not hold
  uint64_t requests = 0;
  uint64_t warningsSuppressed = 0;   // client-provoked warnings the rate limit held back
  uint64_t keys = 0;                 // gauge: keys stored
  std::size_t memoryUsed = 0;        // gauge: bytes charged to the memory budget
  std::size_t memoryPeak = 0;        // highest memoryUsed so far
  std::size_t memoryLimit = 0;       // the budget (maxMemoryBytes or its default)
};

class StoreServer {
 public:
  // Binds and listens at once (so port() is valid on return). Throws NetworkError naming the
  // address when the bind fails (e.g. the port is in use), ConfigError when the TLS files cannot
  // be used or the initial keys do not fit in the memory budget. Does not accept until start().
  StoreServer(boost::asio::io_context& io, StoreServerOptions options);
  ~StoreServer();
  StoreServer(const StoreServer&) = delete;
  StoreServer& operator=(const StoreServer&) = delete;

  // The bound port.
  uint16_t port() const;
  // The bound address, "[::]:29400" or "127.0.0.1:41234" (IPv6 in brackets).
  std::string address() const;
  // Starts accepting connections. Non-blocking.
  void start();
  // Closes the listener and every connection; pending handlers drain. Safe from any thread.
  void stop();
  // A snapshot of the counters. Safe from any thread, never blocks (relaxed atomics: fields may
  // be a few requests apart from each other).
  ServerStats stats() const;

  // Takes a StoreSnapshot (counters, key count, and the rendezvous keys up to `budget` bytes) on
  // the io thread — O(rendezvous keys), whatever else the store holds — and hands it to `done`
  // there; `done` must not block. Non-blocking; safe from any thread. `done` is not called once
  // the server stopped.
  void snapshot(std::size_t budget, std::function<void(StoreSnapshot)> done);

 private:
  class Impl;
  std::shared_ptr<Impl> impl_;
};

// A StoreServer on its own io_context thread. The destructor stops it and joins the thread.
class StoreServerThread {
 public:
  // Throws NetworkError when the bind fails, ConfigError for unusable TLS files or initial keys
  // over the memory budget.
  explicit StoreServerThread(StoreServerOptions options);
  ~StoreServerThread();
  StoreServerThread(const StoreServerThread&) = delete;
  StoreServerThread& operator=(const StoreServerThread&) = delete;

  uint16_t port() const;
  // See StoreServer::stats(). Safe from any thread.
  ServerStats stats() const;
  // Stops the server and joins the thread. Idempotent.
  void stop();

 private:
  class Impl;
  std::unique_ptr<Impl> impl_;
};

}  // namespace ddp
