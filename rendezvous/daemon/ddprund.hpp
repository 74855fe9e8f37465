// ddprund: the standalone rendezvous store daemon (a StoreServer on the main thread).
//
// runDdprund() raises the soft descriptor limit to the hard one (fd_limit.hpp) and logs how many
// connections that holds, binds, writes the port file, prints `listening on ADDRESS:PORT` to
// stdout, starts the status pages (http_ddprund.hpp) and prints `status on http://ADDRESS:PORT/`,
// serves until SIGTERM or SIGINT, then stops cleanly. Exit codes (also in docs/ddprund.md):
//   0  stopped by SIGTERM / SIGINT
//   1  cannot listen (address in use, unknown host, ...), cannot write --port-file, or cannot
//      use --data-dir (locked by another daemon, corrupt, another data format, too big); also
//      when an explicit --http-port cannot be bound (with the default, ddprund warns and serves on)
//   3  the data directory could not be written or synced while serving
//   2  bad flags (handled by rendezvous/daemon/main.cpp before runDdprund()), an unreadable
//      --token-file, TLS files that cannot be used
//
// Thread safety: run() owns the calling thread until the daemon stops; call it once per process.
#pragma once

#include <sys/types.h>

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include "rendezvous/base/endpoint.hpp"
#include "rendezvous/security/address_allowlist.hpp"
#include "rendezvous/security/tls_options.hpp"
#include "rendezvous/server/durability.hpp"
#include "rendezvous/wire/wire_codec.hpp"

namespace ddp {

struct DdprundOptions {
  // Address to listen on; "::" accepts IPv4 and IPv6 (dual-stack).
  std::string host = "::";
  // Port (default kDefaultC10dPort, where ddprun's c10d backend looks); 0 picks a free one (see
  // portFile).
  uint16_t port = kDefaultC10dPort;
  // When set, the bound port is written here (atomically, by rename) once listening.
  std::string portFile;
  // spdlog level; empty = $DDP_LOG_LEVEL, else info.
  std::string logLevel;
  // Per-request limits.
  WireLimits limits;
  // Most simultaneous connections; 0 (--max-connections auto) = what the descriptor limit leaves
  // (StoreServerOptions::maxConnections).
  std::size_t maxConnections = 0;
  // Memory budget for stored data, partial requests and pending replies (--max-memory);
  // 0 = the default of StoreServerOptions::maxMemoryBytes (a quarter of RAM, at most half of
  // RLIMIT_AS and of the cgroup's memory.max).
  std::size_t maxMemoryBytes = 0;
  // How torch <= 2.1 connections are read (--legacy-dialect=auto|1.13|2.1).
  wire::LegacyDialect legacyDialect = wire::LegacyDialect::kAuto;
  // --data-dir, --fsync, --compact-after: keep the data across a restart (durability.hpp).
  DurabilityOptions durability;

  // ---- Security (docs/security.md; StoreServerOptions has the rules) -------------------------
  // --allow: addresses served at all (default: loopback and this host's own subnets).
  AddressAllowlist allow = AddressAllowlist::localSubnets();
  // --token-file: ddprun agents must present the token it holds ("" = no token).
  std::string tokenFile;
  // --allow-unauthenticated: addresses served without a token and, under TLS, in plain TCP.
  AddressAllowlist allowUnauthenticated;
  // Local processes of other users than ddprund's and root: refused unless they present the
  // token (StoreServerOptions::OtherLocalUsers::kAuthenticate); --allow-users: these users count
  // as ddprund's own; --allow-any-local-user: everyone is judged by address alone.
  std::vector<uid_t> allowUsers;
  bool allowAnyLocalUser = false;
  // With a token: --hello-timeout (0: none) and --max-unauthenticated-per-peer
  // (StoreServerOptions has the rules).
  std::chrono::milliseconds helloTimeout{10000};
  std::size_t maxUnauthenticatedPerPeer = 64;
  // --tls-cert/--tls-key/--tls-ca.
  TlsServerOptions tls;

  // Status pages (--http-*; docs/status.md).
  // Port of /, /status and /metrics: kHttpPortAuto = the store's port + 1 (a free port when
  // --port is 0); 0 = no status pages.
  static constexpr int kHttpPortAuto = -1;
  int httpPort = kHttpPortAuto;
  // Address they listen on; empty = the store's --host (the pages show nothing a store client
  // cannot read, and accept no writes).
  std::string httpHost;
  // When set, the bound status port is written here (atomically) once listening.
  std::string httpPortFile;
};

// Exit codes of ddprund.
inline constexpr int kDdprundOk = 0;
inline constexpr int kDdprundCannotListen = 1;
inline constexpr int kDdprundBadFlags = 2;

// Runs the daemon until SIGTERM/SIGINT. Blocks. Returns the exit code; prints one line to stderr
// on failure. Throws ConfigError for an unknown log level.
int runDdprund(const DdprundOptions& options);

// runDdprund(), with what it throws mapped to an exit code and one line on stderr (ConfigError:
// 2, anything else: 1).
int runDdprundOrReport(const DdprundOptions& options);

}  // namespace ddp
