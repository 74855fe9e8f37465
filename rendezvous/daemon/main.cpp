// ddprund: flags -> DdprundOptions -> runDdprund(). See rendezvous/daemon/ddprund.hpp for exit codes.
//
// addFlags() declares every flag into DdprundFlags (the values as given); resolveFlags() checks
// and converts them into DdprundOptions; main() only calls them and runDdprund().
#include <pwd.h>
#include <sys/types.h>

#include <algorithm>
#include <cmath>
#include <iostream>
#include <optional>
#include <sstream>
#include <string>
#include <vector>

#include <CLI/CLI.hpp>

#include "rendezvous/base/build_info.hpp"
#include "rendezvous/base/error.hpp"
#include "rendezvous/daemon/ddprund.hpp"

namespace {

// The flags as given: what needs checking or converting after parsing, and the options that are
// taken as they are.
struct DdprundFlags {
  ddp::DdprundOptions options;
  std::string dialect = "auto";
  std::string maxConnections = "auto";
  std::string allow = "local";
  std::string allowUnauthenticated;
  std::string allowUsers;
  bool allowAnyLocalUser = false;
  double helloTimeoutS = 10;
  std::string fsync = "batch";
  std::string httpPort = "auto";
};

// Where ddprund listens and how much it takes from one client.
void addStoreFlags(CLI::App& app, DdprundFlags& f) {
  auto& o = f.options;
  auto& server = f.options.server;
  app.add_option("--host", server.host, "address to listen on; '::' = every IPv4 and IPv6 address")
      ->capture_default_str();
  app.add_option("--port", server.port, "port to listen on; 0 picks a free one")
      ->capture_default_str();
  app.add_option("--port-file", o.portFile,
                 "write the bound port to this file (atomically) once listening");
  app.add_option("--log-level", o.logLevel,
                 "trace, debug, info, warn, error, critical or off (default: $DDP_LOG_LEVEL, "
                 "else info)")
      ->check(CLI::IsMember({"trace", "debug", "info", "warn", "error", "critical", "off"}));
  const auto sizes = CLI::AsSizeValue(false);  // 64KiB, 256MiB, 1G ...
  app.add_option("--max-key-bytes", server.limits.maxKeyBytes, "longest key accepted")
      ->transform(sizes)
      ->capture_default_str();
  app.add_option("--max-value-bytes", server.limits.maxValueBytes, "largest value accepted")
      ->transform(sizes)
      ->capture_default_str();
  app.add_option("--max-keys-per-request", server.limits.maxKeysPerRequest,
                 "most keys in one CHECK/WAIT/MULTI_GET/MULTI_SET")
      ->check(CLI::PositiveNumber)
      ->capture_default_str();
  app.add_option("--max-connections", f.maxConnections,
                 "most simultaneous connections; auto = what the descriptor limit leaves: ddprund "
                 "raises its soft RLIMIT_NOFILE to the hard limit and keeps limit/16 (16 to 256) "
                 "for its own files. Past it, and out of descriptors, a client is told so and "
                 "closed")
      ->check([](const std::string& v) -> std::string {
        return v == "auto" ? "" : CLI::PositiveNumber(v);
      })
      ->capture_default_str();
  app.add_option("--max-memory", server.maxMemoryBytes,
                 "memory for stored keys and values, partially received requests and pending "
                 "replies; past it the offending connection is closed (default: a quarter of RAM, "
                 "at most half of RLIMIT_AS and of the cgroup memory limit)")
      ->transform(sizes)
      ->check(CLI::PositiveNumber);
  app.add_option("--legacy-dialect", f.dialect,
                 "how torch <= 2.1 connections are read: auto (tell 1.13 from 2.1 by the opcodes "
                 "used), 1.13, or 2.1")
      ->check(CLI::IsMember({"auto", "1.13", "2.1"}))
      ->capture_default_str();
}

// Who may connect, and over what (docs/security.md).
void addSecurityFlags(CLI::App& app, DdprundFlags& f) {
  auto& o = f.options;
  auto& server = f.options.server;
  app.add_option("--allow", f.allow,
                 "addresses served at all: CIDR blocks or addresses, comma-separated, or the words "
                 "any, loopback, local (loopback + this host's subnets); others are closed at once "
                 "with a logged reason")
      ->capture_default_str();
  app.add_option("--allow-users", f.allowUsers,
                 "local processes of these users (names or uids, comma-separated) are served as "
                 "ddprund's own user's; by default only ddprund's user and root may connect from "
                 "this machine (other users only with --token-file's token)");
  app.add_flag("--allow-any-local-user", f.allowAnyLocalUser,
               "serve local processes of every user, judged by address alone (insecure: any "
               "local user can then end any job)");
  app.add_option("--token-file", o.tokenFile,
                 "ddprun agents must present the token in this file (its first line; the agents' "
                 "--rdzv-conf token_file=); other clients are refused unless "
                 "--allow-unauthenticated lists their address");
  app.add_option("--allow-unauthenticated", f.allowUnauthenticated,
                 "addresses served without a token (and, with TLS, in plain TCP): torch agents and "
                 "workers on trusted hosts (another user's local processes still need the token); "
                 "same grammar as --allow");
  app.add_option("--hello-timeout", f.helloTimeoutS,
                 "with --token-file: seconds a connection has to present the token; then it is "
                 "closed (0 = no limit)")
      ->check(CLI::NonNegativeNumber)
      ->capture_default_str();
  app.add_option("--max-unauthenticated-per-peer", server.maxUnauthenticatedPerPeer,
                 "with --token-file: most connections without the token at once from one local "
                 "user or one remote address (one more closes that peer's oldest); all of them "
                 "together hold at most half of --max-connections")
      ->check(CLI::PositiveNumber)
      ->capture_default_str();
  app.add_option("--tls-cert", server.tls.certFile,
                 "serve TLS with this PEM certificate (chain); needs --tls-key");
  app.add_option("--tls-key", server.tls.keyFile, "the PEM private key of --tls-cert");
  app.add_option("--tls-ca", server.tls.caFile,
                 "require client certificates signed by this PEM CA (mutual TLS)");
}

// Keeping the data across a restart (docs/ddprund.md "Durability").
void addDurabilityFlags(CLI::App& app, DdprundFlags& f) {
  auto& d = f.options.server.durability;
  app.add_option("--data-dir", d.dataDir,
                 "keep the store in this directory (a journal of every change plus snapshots), "
                 "replayed at start, so a restarted daemon has every acknowledged write; "
                 "default: memory only");
  app.add_option("--fsync", f.fsync,
                 "with --data-dir, when a change counts as durable (its reply is sent only then): "
                 "always (fdatasync per change), batch (one fdatasync per group of changes), off "
                 "(written to the page cache: survives killing the daemon, not a machine crash)")
      ->check(CLI::IsMember({"always", "batch", "off"}))
      ->capture_default_str();
  app.add_option("--compact-after", d.compactAfterBytes,
                 "with --data-dir, write a snapshot once the journal grew by this much (and by "
                 "more than the last snapshot)")
      ->transform(CLI::AsSizeValue(false))
      ->check(CLI::PositiveNumber)
      ->capture_default_str();
}

// The status pages (docs/status.md).
void addStatusFlags(CLI::App& app, DdprundFlags& f) {
  auto& o = f.options;
  app.add_option("--http-port", f.httpPort,
                 "port of the status page, /status and /metrics: auto = the store's port + 1 (a "
                 "free one with --port 0), 0 = off")
      ->check([](const std::string& v) -> std::string {
        if (v == "auto") return "";
        return CLI::Range(0, 65535)(v);
      })
      ->capture_default_str();
  app.add_option("--http-host", o.httpHost,
                 "address the status pages listen on (default: the store's --host; 127.0.0.1 "
                 "with --token-file or --tls-cert)");
  app.add_option("--http-port-file", o.httpPortFile,
                 "write the bound status port to this file (atomically) once listening");
}

void addFlags(CLI::App& app, DdprundFlags& flags) {
  addStoreFlags(app, flags);
  addSecurityFlags(app, flags);
  addDurabilityFlags(app, flags);
  addStatusFlags(app, flags);
  // CLI11 prints the text with a newline of its own.
  std::string version = ddp::versionText("ddprund");
  version.pop_back();
  app.set_version_flag("--version", version);
}

// The uids of --allow-users ("alice,1001"). Throws ConfigError naming an unknown user.
std::vector<uid_t> parseUsers(const std::string& list) {
  std::vector<uid_t> uids;
  std::stringstream items(list);
  std::string item;
  while (std::getline(items, item, ',')) {
    item.erase(0, item.find_first_not_of(" \t"));
    item.erase(item.find_last_not_of(" \t") + 1);
    if (item.empty()) continue;
    const bool numeric = item.find_first_not_of("0123456789") == std::string::npos;
    if (numeric && item.size() < 10) {
      uids.push_back(static_cast<uid_t>(std::stoul(item)));
      continue;
    }
    passwd entry{};
    passwd* found = nullptr;
    std::vector<char> buffer(16384);
    if (::getpwnam_r(item.c_str(), &entry, buffer.data(), buffer.size(), &found) != 0 || !found) {
      throw ddp::ConfigError("--allow-users: no user named '" + item + "'");
    }
    uids.push_back(found->pw_uid);
  }
  return uids;
}

// The allowlists and local-user rules. Throws ConfigError.
void resolveSecurityFlags(const DdprundFlags& flags, ddp::DdprundOptions& options) {
  auto& server = options.server;
  server.allow = ddp::AddressAllowlist::parse(flags.allow);
  server.allowUnauthenticated = ddp::AddressAllowlist::parse(flags.allowUnauthenticated);
  server.trustedUids = parseUsers(flags.allowUsers);
  if (flags.allowAnyLocalUser && !server.trustedUids.empty()) {
    throw ddp::ConfigError("--allow-users and --allow-any-local-user contradict each other");
  }
  server.otherLocalUsers = flags.allowAnyLocalUser
                               ? ddp::StoreServerOptions::OtherLocalUsers::kServe
                               : ddp::StoreServerOptions::OtherLocalUsers::kAuthenticate;
  server.helloTimeout = std::chrono::milliseconds(std::llround(flags.helloTimeoutS * 1000));
  const auto& tls = server.tls;
  if (tls.certFile.empty() != tls.keyFile.empty() ||
      (!tls.caFile.empty() && tls.certFile.empty())) {
    throw ddp::ConfigError("--tls-cert and --tls-key go together, and --tls-ca needs them");
  }
}

// The options from the flags; nullopt (after printing the reason) when a flag is wrong.
std::optional<ddp::DdprundOptions> resolveFlags(const DdprundFlags& flags) {
  ddp::DdprundOptions options = flags.options;
  try {
    resolveSecurityFlags(flags, options);
  } catch (const ddp::ConfigError& e) {
    std::cerr << "ddprund: " << e.what() << " (see ddprund --help)" << std::endl;
    return std::nullopt;
  }
  auto& server = options.server;
  server.maxConnections = flags.maxConnections == "auto" ? 0 : std::stoull(flags.maxConnections);
  server.limits.maxRequestBytes =
      std::max(server.limits.maxRequestBytes, 2 * server.limits.maxValueBytes + (1u << 20));
  server.durability.fsync = flags.fsync == "always" ? ddp::FsyncMode::kAlways
                            : flags.fsync == "off"  ? ddp::FsyncMode::kOff
                                                    : ddp::FsyncMode::kBatch;
  options.httpPort = flags.httpPort == "auto" ? ddp::DdprundOptions::kHttpPortAuto
                                              : std::stoi(flags.httpPort);
  server.legacyDialect = flags.dialect == "1.13"  ? ddp::wire::LegacyDialect::kTorch113
                         : flags.dialect == "2.1" ? ddp::wire::LegacyDialect::kTorch21
                                                  : ddp::wire::LegacyDialect::kAuto;
  return options;
}

}  // namespace

int main(int argc, char** argv) {
  DdprundFlags flags;
  CLI::App app{"ddprund: a standalone key-value store daemon, wire-compatible with PyTorch's c10d "
               "TCPStore (torch 1.13 to 2.x clients), for ddprun and torchrun rendezvous."};
  addFlags(app, flags);
  try {
    app.parse(argc, argv);
  } catch (const CLI::Success& e) {
    return app.exit(e);  // --help, --version
  } catch (const CLI::ParseError& e) {
    std::cerr << "ddprund: " << e.what() << " (see ddprund --help)" << std::endl;
    return ddp::kDdprundBadFlags;
  }
  const auto options = resolveFlags(flags);
  if (!options) return ddp::kDdprundBadFlags;
  return ddp::runDdprundOrReport(*options);
}
