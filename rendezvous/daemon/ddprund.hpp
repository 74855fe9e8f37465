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

#include <string>

#include "rendezvous/base/endpoint.hpp"
#include "rendezvous/server/store_server.hpp"

namespace ddp {

// The store server's options as ddprund sets them before its flags: a bare StoreServer's, but on
// kDefaultC10dPort (where ddprun's c10d backend looks), named "ddprund", serving loopback and
// this host's own subnets (--allow local), and other local users only with the token.
StoreServerOptions ddprundServerOptions();

struct DdprundOptions {
  // The store: --host, --port (0 picks a free one; see portFile), the per-request limits,
  // --max-connections (0 = auto), --max-memory (0 = the default), --legacy-dialect, --data-dir,
  // --fsync, --compact-after, and who may connect (docs/security.md): --allow,
  // --allow-unauthenticated, --allow-users (trustedUids), --allow-any-local-user
  // (otherLocalUsers kServe), --hello-timeout, --max-unauthenticated-per-peer, --tls-*.
  // StoreServerOptions has the rules; `token` is read from tokenFile at start.
  StoreServerOptions server = ddprundServerOptions();
  // When set, the bound port is written here (atomically, by rename) once listening.
  std::string portFile;
  // spdlog level; empty = $DDP_LOG_LEVEL, else info.
  std::string logLevel;
  // --token-file: ddprun agents must present the token it holds ("" = no token).
  std::string tokenFile;

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
