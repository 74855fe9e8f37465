#include "rendezvous/daemon/ddprund.hpp"

#include <unistd.h>

#include <csignal>
#include <cstdio>
#include <fstream>
#include <algorithm>
#include <iostream>
#include <memory>

#include <boost/asio/io_context.hpp>
#include <boost/asio/signal_set.hpp>

#include "rendezvous/base/error.hpp"
#include "rendezvous/base/fd_limit.hpp"
#include "rendezvous/base/logging.hpp"
#include "rendezvous/http/http_ddprund.hpp"
#include "rendezvous/security/tls_context.hpp"
#include "rendezvous/security/token.hpp"
#include "rendezvous/server/store_server.hpp"

namespace ddp {
namespace {

// A job of 16,384 ranks on 2,048 nodes holds about this many connections to its store.
constexpr std::size_t kLargeJobConnections = 8192;

// Writes "<port>\n" to a temporary file next to `path` and renames it over `path`, so a reader
// never sees a partial file.
bool writePortFile(const std::string& path, uint16_t port, std::string& error) {
  const std::string tmp = path + ".tmp." + std::to_string(::getpid());
  {
    std::ofstream out(tmp, std::ios::trunc);
    out << port << '\n';
    out.flush();
    if (!out) {
      error = "cannot write the port file " + tmp;
      return false;
    }
  }
  if (std::rename(tmp.c_str(), path.c_str()) != 0) {
    error = "cannot rename " + tmp + " to " + path;
    std::remove(tmp.c_str());
    return false;
  }
  return true;
}

// Starts the status pages unless they are off. Fails (nullptr, `error` set) only when the user
// named the port; the default port in use costs a warning, never the store.
std::unique_ptr<DdprundStatus> startStatus(const DdprundOptions& options, StoreServer& server,
                                           std::string& error) {
  if (options.httpPort == 0) return nullptr;
  const bool automatic = options.httpPort == DdprundOptions::kHttpPortAuto;
  HttpServerOptions http;
  // The pages cannot ask for the token or a client certificate: a protected store keeps them on
  // loopback unless --http-host says otherwise.
  const bool protectedStore = !options.tokenFile.empty() || !options.server.tls.certFile.empty();
  http.host = !options.httpHost.empty() ? options.httpHost
              : protectedStore          ? "127.0.0.1"
                                        : options.server.host;
  http.name = "ddprund status";
  http.port = static_cast<uint16_t>(!automatic                 ? options.httpPort
                                    : options.server.port == 0 ? 0
                                                               : (server.port() + 1) % 65536);
  try {
    auto status = std::make_unique<DdprundStatus>(server, http);
    if (!options.httpPortFile.empty() &&
        !writePortFile(options.httpPortFile, status->port(), error)) {
      return nullptr;
    }
    return status;
  } catch (const Error& e) {
    if (!automatic) {
      error = e.what();
      return nullptr;
    }
    logger("store")->warn("ddprund: no status pages: {} (set --http-port)", e.what());
    return nullptr;
  }
}

// Says what the raised descriptor limit holds: a warning when it holds fewer connections than
// asked for (--max-connections), or than a large job needs. Logged once the server stands, so a
// daemon that cannot start says only why.
void reportDescriptorLimit(const DdprundOptions& options, const FdLimit& limit) {
  auto log = logger("store");
  const std::size_t room = connectionRoom(limit.soft);
  log->info(
      "ddprund: file descriptors: {}: up to {} connections{}", limit.describe(),
      options.server.maxConnections == 0 ? room : std::min(room, options.server.maxConnections),
      options.server.maxConnections == 0 ? " (--max-connections auto)" : "");
  if (options.server.maxConnections > room) {
    log->warn(
        "ddprund: --max-connections {} is more than RLIMIT_NOFILE {} holds (about {} "
        "connections): past that, clients are told the store is out of file descriptors; "
        "raise the hard limit (ulimit -Hn, systemd LimitNOFILE=)",
        options.server.maxConnections, limit.soft, room);
  } else if (options.server.maxConnections == 0 && room < kLargeJobConnections) {
    log->warn("ddprund: RLIMIT_NOFILE {} holds only {} connections (each ddprun agent holds 2 or "
              "3): raise the hard limit for large jobs (ulimit -Hn, systemd LimitNOFILE=)",
              limit.soft, room);
  }
}

}  // namespace

StoreServerOptions ddprundServerOptions() {
  StoreServerOptions options;
  options.port = kDefaultC10dPort;
  options.name = "ddprund";
  options.allow = AddressAllowlist::localSubnets();
  options.otherLocalUsers = StoreServerOptions::OtherLocalUsers::kAuthenticate;
  return options;
}

int runDdprund(const DdprundOptions& options) {
  setupLogging(options.logLevel);
  auto log = logger("store");
  boost::asio::io_context io(1);
  const FdLimit limit = raiseFdLimit();  // before the server: its connections count against it
  StoreServerOptions serverOptions = options.server;
  try {  // an unreadable token file or unusable TLS files are bad flags (exit 2)
    if (!options.tokenFile.empty()) serverOptions.token = readTokenFile(options.tokenFile);
    if (serverOptions.tls.enabled()) makeServerTlsContext(serverOptions.tls);
  } catch (const ConfigError& e) {
    std::cerr << "ddprund: " << e.what() << std::endl;
    return kDdprundBadFlags;
  }
  std::unique_ptr<StoreServer> server;
  try {
    server = std::make_unique<StoreServer>(io, serverOptions);
  } catch (const Error& e) {  // NetworkError, or ConfigError from the data directory
    std::cerr << "ddprund: " << e.what() << std::endl;
    return kDdprundCannotListen;
  }
  std::string error;
  if (!options.portFile.empty() && !writePortFile(options.portFile, server->port(), error)) {
    std::cerr << "ddprund: " << error << std::endl;
    return kDdprundCannotListen;
  }

  boost::asio::signal_set signals(io, SIGINT, SIGTERM);
  signals.async_wait([&](const boost::system::error_code& ec, int signal) {
    if (ec) return;
    log->info("ddprund: signal {} received, stopping", signal);
    server->stop();
  });
  auto status = startStatus(options, *server, error);
  if (!error.empty()) {
    std::cerr << "ddprund: " << error << std::endl;
    return kDdprundCannotListen;
  }
  server->start();
  reportDescriptorLimit(options, limit);
  log->info("ddprund: memory budget {} MiB (--max-memory{})", server->stats().memoryLimit >> 20,
            options.server.maxMemoryBytes == 0 ? ", default" : "");
  std::cout << "listening on " << server->address() << std::endl;
  if (status) std::cout << "status on http://" << status->address() << "/" << std::endl;
  io.run();
  status.reset();  // before the server it reads
  return kDdprundOk;
}

int runDdprundOrReport(const DdprundOptions& options) {
  try {
    return runDdprund(options);
  } catch (const ConfigError& e) {
    std::cerr << "ddprund: " << e.what() << std::endl;
    return kDdprundBadFlags;
  } catch (const std::exception& e) {
    std::cerr << "ddprund: " << e.what() << std::endl;
    return kDdprundCannotListen;
  }
}

}  // namespace ddp
