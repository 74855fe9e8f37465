// ddprund: flags -> DdprundOptions -> runDdprund(). See rendezvous/server/ddprund.hpp for exit codes.
#include <algorithm>
#include <iostream>
#include <map>
#include <string>

#include <CLI/CLI.hpp>

#include "ddp_version.hpp"
#include "rendezvous/server/ddprund.hpp"
#include "rendezvous/base/error.hpp"

namespace {

// The allowlists as given, parsed once the flags are read.
struct SecurityFlags {
  std::string allow = "local";
  std::string allowUnauthenticated;
};

// Who may connect, and over what (README "Security").
void addSecurityFlags(CLI::App& app, ddp::DdprundOptions& options, SecurityFlags& flags) {
  app.add_option("--allow", flags.allow,
                 "addresses served at all: CIDR blocks or addresses, comma-separated, or the words "
                 "any, loopback, local (loopback + this host's subnets); others are closed at once "
                 "with a logged reason")
      ->capture_default_str();
  app.add_option("--token-file", options.tokenFile,
                 "ddprun agents must present the token in this file (its first line; the agents' "
                 "--rdzv-conf token_file=); other clients are refused unless "
                 "--allow-unauthenticated lists their address");
  app.add_option("--allow-unauthenticated", flags.allowUnauthenticated,
                 "addresses served without a token (and, with TLS, in plain TCP): torch agents and "
                 "workers on trusted hosts; same grammar as --allow");
  app.add_option("--tls-cert", options.tls.certFile,
                 "serve TLS with this PEM certificate (chain); needs --tls-key");
  app.add_option("--tls-key", options.tls.keyFile, "the PEM private key of --tls-cert");
  app.add_option("--tls-ca", options.tls.caFile,
                 "require client certificates signed by this PEM CA (mutual TLS)");
}

// Parses the allowlists; false (after printing the reason) when one is malformed.
bool resolveSecurityFlags(const SecurityFlags& flags, ddp::DdprundOptions& options) {
  try {
    options.allow = ddp::AddressAllowlist::parse(flags.allow);
    options.allowUnauthenticated = ddp::AddressAllowlist::parse(flags.allowUnauthenticated);
  } catch (const ddp::ConfigError& e) {
    std::cerr << "ddprund: " << e.what() << " (see ddprund --help)" << std::endl;
    return false;
  }
  if (options.tls.certFile.empty() != options.tls.keyFile.empty() ||
      (!options.tls.caFile.empty() && options.tls.certFile.empty())) {
    std::cerr << "ddprund: --tls-cert and --tls-key go together, and --tls-ca needs them"
              << std::endl;
    return false;
  }
  return true;
}

}  // namespace

int main(int argc, char** argv) {
  ddp::DdprundOptions options;
  std::string dialect = "auto";
  CLI::App app{"ddprund: a standalone key-value store daemon, wire-compatible with PyTorch's c10d "
               "TCPStore (torch 1.13 to 2.x clients), for ddprun and torchrun rendezvous."};
  app.add_option("--host", options.host, "address to listen on; '::' = every IPv4 and IPv6 address")
      ->capture_default_str();
  app.add_option("--port", options.port, "port to listen on; 0 picks a free one")
      ->capture_default_str();
  app.add_option("--port-file", options.portFile,
                 "write the bound port to this file (atomically) once listening");
  app.add_option("--log-level", options.logLevel,
                 "trace, debug, info, warn, error, critical or off (default: $DDP_LOG_LEVEL, "
                 "else info)")
      ->check(CLI::IsMember({"trace", "debug", "info", "warn", "error", "critical", "off"}));
  const auto sizes = CLI::AsSizeValue(false);  // 64KiB, 256MiB, 1G ...
  app.add_option("--max-key-bytes", options.limits.maxKeyBytes, "longest key accepted")
      ->transform(sizes)
      ->capture_default_str();
  app.add_option("--max-value-bytes", options.limits.maxValueBytes, "largest value accepted")
      ->transform(sizes)
      ->capture_default_str();
  app.add_option("--max-keys-per-request", options.limits.maxKeysPerRequest,
                 "most keys in one CHECK/WAIT/MULTI_GET/MULTI_SET")
      ->check(CLI::PositiveNumber)
      ->capture_default_str();
  app.add_option("--max-connections", options.maxConnections, "most simultaneous connections")
      ->check(CLI::PositiveNumber)
      ->capture_default_str();
  app.add_option("--max-memory", options.maxMemoryBytes,
                 "memory for stored keys and values, partially received requests and pending "
                 "replies; past it the offending connection is closed (default: a quarter of RAM, "
                 "at most half of RLIMIT_AS and of the cgroup memory limit)")
      ->transform(sizes)
      ->check(CLI::PositiveNumber);
  app.add_option("--legacy-dialect", dialect,
                 "how torch <= 2.1 connections are read: auto (tell 1.13 from 2.1 by the opcodes "
                 "used), 1.13, or 2.1")
      ->check(CLI::IsMember({"auto", "1.13", "2.1"}))
      ->capture_default_str();
  SecurityFlags security;
  addSecurityFlags(app, options, security);
  std::string fsync = "batch";
  app.add_option("--data-dir", options.durability.dataDir,
                 "keep the store in this directory (a journal of every change plus snapshots), "
                 "replayed at start, so a restarted daemon has every acknowledged write; "
                 "default: memory only");
  app.add_option("--fsync", fsync,
                 "with --data-dir, when a change counts as durable (its reply is sent only then): "
                 "always (fdatasync per change), batch (one fdatasync per group of changes), off "
                 "(written to the page cache: survives killing the daemon, not a machine crash)")
      ->check(CLI::IsMember({"always", "batch", "off"}))
      ->capture_default_str();
  app.add_option("--compact-after", options.durability.compactAfterBytes,
                 "with --data-dir, write a snapshot once the journal grew by this much (and by "
                 "more than the last snapshot)")
      ->transform(sizes)
      ->check(CLI::PositiveNumber)
      ->capture_default_str();
  // Status pages (README "Status page and metrics").
  std::string httpPort = "auto";
  app.add_option("--http-port", httpPort,
                 "port of the status page, /status and /metrics: auto = the store's port + 1 (a "
                 "free one with --port 0), 0 = off")
      ->check([](const std::string& v) -> std::string {
        if (v == "auto") return "";
        return CLI::Range(0, 65535)(v);
      })
      ->capture_default_str();
  app.add_option("--http-host", options.httpHost,
                 "address the status pages listen on (default: the store's --host; 127.0.0.1 "
                 "with --token-file or --tls-cert)");
  app.add_option("--http-port-file", options.httpPortFile,
                 "write the bound status port to this file (atomically) once listening");
  app.set_version_flag("--version", std::string("ddprund ") + DDP_VERSION_STRING);

  try {
    app.parse(argc, argv);
  } catch (const CLI::Success& e) {
    return app.exit(e);  // --help, --version
  } catch (const CLI::ParseError& e) {
    std::cerr << "ddprund: " << e.what() << " (see ddprund --help)" << std::endl;
    return ddp::kDdprundBadFlags;
  }
  if (!resolveSecurityFlags(security, options)) return ddp::kDdprundBadFlags;
  options.limits.maxRequestBytes =
      std::max(options.limits.maxRequestBytes, 2 * options.limits.maxValueBytes + (1u << 20));
  options.durability.fsync = fsync == "always"  ? ddp::FsyncMode::kAlways
                             : fsync == "off"   ? ddp::FsyncMode::kOff
                                                : ddp::FsyncMode::kBatch;
  options.httpPort = httpPort == "auto" ? ddp::DdprundOptions::kHttpPortAuto : std::stoi(httpPort);
  options.legacyDialect = dialect == "1.13"  ? ddp::wire::LegacyDialect::kTorch113
                          : dialect == "2.1" ? ddp::wire::LegacyDialect::kTorch21
                                             : ddp::wire::LegacyDialect::kAuto;
  try {
    return ddp::runDdprund(options);
  } catch (const ddp::ConfigError& e) {
    std::cerr << "ddprund: " << e.what() << std::endl;
    return ddp::kDdprundBadFlags;
  } catch (const std::exception& e) {
    std::cerr << "ddprund: " << e.what() << std::endl;
    return ddp::kDdprundCannotListen;
  }
}
