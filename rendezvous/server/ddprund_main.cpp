// ddprund: flags -> DdprundOptions -> runDdprund(). See rendezvous/server/ddprund.hpp for exit codes.
#include <algorithm>
#include <iostream>
#include <map>
#include <string>

#include <CLI/CLI.hpp>

#include "ddp_version.hpp"
#include "rendezvous/server/ddprund.hpp"
#include "rendezvous/base/error.hpp"

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
                 "address the status pages listen on (default: the store's --host)");
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
