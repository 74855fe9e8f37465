#include "rendezvous/server/store_server.hpp"

#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include <boost/asio/ip/tcp.hpp>
#include <boost/asio/ip/v6_only.hpp>
#include <boost/asio/post.hpp>
#include <boost/asio/steady_timer.hpp>

#include "rendezvous/security/tls_context.hpp"
#include "rendezvous/server/detail/admission.hpp"
#include "rendezvous/server/detail/busy_notice.hpp"
#include "rendezvous/server/detail/server_core.hpp"
#include "rendezvous/server/detail/store_session.hpp"
#include "rendezvous/server/listen_address.hpp"
#include "rendezvous/base/endpoint.hpp"
#include "rendezvous/base/error.hpp"
#include "rendezvous/base/fd_limit.hpp"
#include "rendezvous/base/logging.hpp"

namespace ddp {
namespace asio = boost::asio;
using asio::ip::tcp;

namespace {

// "TLS, mutual; token required (plain from 10.0.0.0/8); clients from 127.0.0.0/8, ::1/128".
std::string securitySummary(const StoreServerOptions& o) {
  std::string out = !o.tls.enabled() ? "plain TCP" : o.tls.caFile.empty() ? "TLS" : "TLS, mutual";
  if (!o.token.empty()) {
    out += "; token required";
    if (!o.allowUnauthenticated.empty()) out += " (not from " + o.allowUnauthenticated.describe() + ")";
  }
  out += "; clients from " + o.allow.describe();
  using Others = StoreServerOptions::OtherLocalUsers;
  const std::string trusted = o.trustedUids.empty() ? "" : " (and of the users allowed)";
  if (o.otherLocalUsers == Others::kRefuse) out += ", local ones of this user only" + trusted;
  if (o.otherLocalUsers == Others::kAuthenticate) {
    out += o.token.empty() ? ", local ones of this user only" + trusted
                           : ", other local users' with the token only";
  }
  return out;
}

bool outOfDescriptors(const boost::system::error_code& ec) {
  return ec == asio::error::no_descriptors ||
         ec == boost::system::errc::too_many_files_open_in_system;
}

}  // namespace

class StoreServer::Impl : public std::enable_shared_from_this<Impl> {
 public:
  Impl(asio::io_context& io, StoreServerOptions options)
      : io_(io),
        acceptor_(io),
        retryTimer_(io),
        core_(std::make_shared<detail::ServerCore>(std::move(options), io.get_executor())) {
    if (core_->options.tls.enabled()) core_->tls = makeServerTlsContext(core_->options.tls);
    core_->openJournal(io_.get_executor());
    for (const auto& [key, value] : core_->options.initialKeys) {
      if (!core_->state.preset(key, value)) {
        throw ConfigError(core_->options.name + ": the initial key '" + key +
                          "' does not fit in the memory budget");
      }
    }
    core_->commitChanges();
    listen();
  }

  ServerStats stats() const { return core_->stats(); }

  uint16_t port() const { return port_; }
  const std::string& address() const { return address_; }

  void start() {
    asio::post(io_, [self = shared_from_this()] {
      if (self->core_->stopped) return;
      self->accept();
    });
  }

  void requestStop() {
    asio::post(io_, [self = shared_from_this()] { self->stop(); });
  }

  void snapshot(std::size_t budget, std::function<void(StoreSnapshot)> done) {
    asio::post(io_, [self = shared_from_this(), budget, done = std::move(done)] {
      if (self->core_->stopped) return;
      StoreSnapshot out;
      out.takenAt = std::chrono::steady_clock::now();
      out.stats = self->core_->storeStats;
      out.connections = self->core_->sessions.size();
      out.connectionLimit = self->core_->options.maxConnections;
      if (const auto& waiting = self->core_->unauthenticated) {
        out.unauthenticated = waiting->size();
        out.unauthenticatedClosed = waiting->closed();
      }
      self->core_->state.snapshot(budget, out);
      out.cost = std::chrono::steady_clock::now() - out.takenAt;
      done(std::move(out));
    });
  }

 private:
  void listen() {
    const auto& opts = core_->options;
    const auto endpoint = openListener(
        acceptor_, resolveListenAddress(io_, opts.host, opts.port, "store server"), opts.name,
        [&](const std::string& why) {
          core_->log->warn("{}: IPv6 is unavailable ({}); listening on 0.0.0.0 instead", opts.name,
                           why);
        });
    // Accepted in batches until would_block (acceptLoop).
    boost::system::error_code ec;
    acceptor_.non_blocking(true, ec);
    if (ec) {
      throw NetworkError("cannot listen on " + formatSocketEndpoint(endpoint) + " (" + opts.name +
                         "): " + ec.message());
    }
    const auto local = acceptor_.local_endpoint();
    port_ = local.port();
    address_ = formatSocketEndpoint(local);
    core_->log->info("{}: listening on {} ({}); up to {} connections (RLIMIT_NOFILE {})",
                     opts.name, address_, securitySummary(opts), opts.maxConnections,
                     core_->fdLimit);
  }

  void accept() {
    acceptor_.async_accept(
        [self = shared_from_this()](const boost::system::error_code& ec, tcp::socket socket) {
          self->onAccept(ec, std::move(socket));
        });
  }

  void onAccept(const boost::system::error_code& ec, tcp::socket socket) {
    if (core_->stopped) return;
    if (ec) {
      if (ec == asio::error::operation_aborted) return;
      if (outOfDescriptors(ec)) return onOutOfDescriptors();
      core_->warn("accept failed: " + ec.message());
      return acceptLater();
    }
    admit(std::move(socket));
    // Drain the rest of the backlog without a trip through the event loop per connection: when
    // thousands of ranks connect at once this keeps the kernel's accept queue from overflowing.
    for (int i = 0; i < kAcceptBatch; ++i) {
      boost::system::error_code more;
      tcp::socket next(io_);
      acceptor_.accept(next, more);  // non-blocking (see listen): would_block ends the batch
      if (outOfDescriptors(more)) return onOutOfDescriptors();
      if (more) break;
      admit(std::move(next));
    }
    accept();
  }

  // Backs off before accepting again, instead of spinning on a failing accept.
  void acceptLater() {
    retryTimer_.expires_after(std::chrono::milliseconds(100));
    retryTimer_.async_wait([self = shared_from_this()](const boost::system::error_code& e) {
      if (self->core_->stopped || e) return;
      self->accept();  // onOutOfDescriptors takes the spare back itself
    });
  }

  // accept() failed for want of a descriptor. Linux takes the descriptor before it looks at the
  // queue, so this also happens with no client waiting: the spare tells which. A waiting client is
  // told why, then the loop goes on (each pending client told in turn); with none waiting the
  // server waits for one, and refuses nobody. The spare is given up and taken back under
  // spareDescriptorMutex(), so the status pages' acceptor cannot take it in between. Without a
  // spare (another thread took the descriptor) the loop backs off, refusing nobody.
  void onOutOfDescriptors() {
    std::unique_lock<std::mutex> lock(spareDescriptorMutex());
    spare_.restore();  // no-op when held
    boost::system::error_code ec = asio::error::no_descriptors;
    tcp::socket socket(io_);
    if (spare_.release()) acceptor_.accept(socket, ec);
    if (ec == asio::error::would_block || ec == asio::error::try_again) {
      spare_.restore();
      return awaitClient();
    }
    if (outOfDescriptors(ec)) {  // no spare to give up, or another thread took it
      spare_.restore();
      lock.unlock();
      core_->warn("out of file descriptors (RLIMIT_NOFILE " +
                  std::to_string(core_->fdLimit) +
                  ") and its spare descriptor is taken: a client waiting to connect waits until "
                  "one frees");
      return acceptLater();
    }
    detail::bump(core_->counters.outOfDescriptors);
    ++core_->storeStats.outOfDescriptors;
    const std::string why = "out of file descriptors (RLIMIT_NOFILE " +
                            std::to_string(core_->fdLimit) + ", " +
                            std::to_string(core_->sessions.size()) + " connections open)";
    const bool told = !ec;
    std::string peer = "a client";
    if (told) {
      boost::system::error_code ignored;
      peer = formatSocketEndpoint(socket.remote_endpoint(ignored));
      detail::sendBusyAndClose(socket, core_->options.name + ": " + why);
    }
    spare_.restore();
    const bool spareBack = spare_.held();
    lock.unlock();
    core_->refusals.refused(
        *core_->log, core_->options.name, peer, detail::RefusalKind::kOverload,
        why + (told ? "; told it so" : "; could not tell it (accept: " + ec.message() + ")") +
            " (raise the limit: ulimit -n, systemd LimitNOFILE=)");
    if (told && spareBack) return accept();  // the next pending client is told in turn
    acceptLater();
  }

  // Out of descriptors with nobody waiting: accepts again once a client is.
  void awaitClient() {
    acceptor_.async_wait(tcp::acceptor::wait_read,
                         [self = shared_from_this()](const boost::system::error_code& e) {
                           if (self->core_->stopped || e == asio::error::operation_aborted) return;
                           if (e) return self->acceptLater();
                           self->accept();
                         });
  }

  void admit(tcp::socket socket) {
    const auto& opts = core_->options;
    // Connections still in their TLS handshake count: they hold a socket and memory too.
    if (core_->sessions.size() + core_->handshaking.size() >= opts.maxConnections) {
      detail::bump(core_->counters.refused);
      ++core_->storeStats.connectionsRefused;
      const std::string why =
          "at its connection limit (" + std::to_string(opts.maxConnections) +
          " connections open; --max-connections" +
          (core_->connectionLimitAuto ? " auto, from RLIMIT_NOFILE " + std::to_string(core_->fdLimit)
                                      : "") +
          ")";
      boost::system::error_code ignored;
      const std::string peer = formatSocketEndpoint(socket.remote_endpoint(ignored));
      detail::sendBusyAndClose(socket, opts.name + ": " + why);
      core_->refusals.refused(*core_->log, opts.name, peer, detail::RefusalKind::kOverload,
                              why + "; told it so");
      return;
    }
    boost::system::error_code ignored;
    socket.set_option(tcp::no_delay(true), ignored);
    ++core_->storeStats.connectionsAccepted;  // before admission: refused ones were accepted too
    detail::admit(std::move(socket), core_);
  }

  void stop() {
    if (core_->stopped) return;
    core_->stopped = true;
    boost::system::error_code ignored;
    acceptor_.close(ignored);
    retryTimer_.cancel();
    if (core_->unauthenticated) core_->unauthenticated->stop();
    detail::cancelAdmissions(*core_);
    const std::vector<detail::StoreSession*> open(core_->sessions.begin(), core_->sessions.end());
    for (auto* session : open) session->close("");
    core_->flushWarnings();
    core_->refusals.flush(*core_->log, core_->options.name);
    core_->log->info("{}: stopped ({} keys held)", core_->options.name, core_->state.numKeys());
  }

  static constexpr int kAcceptBatch = 64;

  asio::io_context& io_;
  tcp::acceptor acceptor_;
  asio::steady_timer retryTimer_;
  detail::SpareDescriptor spare_;  // for telling a client that no descriptor is left
  std::shared_ptr<detail::ServerCore> core_;
  uint16_t port_ = 0;
  std::string address_;
};

StoreServer::StoreServer(asio::io_context& io, StoreServerOptions options)
    : impl_(std::make_shared<Impl>(io, std::move(options))) {}

StoreServer::~StoreServer() { impl_->requestStop(); }

uint16_t StoreServer::port() const { return impl_->port(); }

std::string StoreServer::address() const { return impl_->address(); }

ServerStats StoreServer::stats() const { return impl_->stats(); }

void StoreServer::start() { impl_->start(); }

void StoreServer::stop() { impl_->requestStop(); }

void StoreServer::snapshot(std::size_t budget, std::function<void(StoreSnapshot)> done) {
  impl_->snapshot(budget, std::move(done));
}

// ---- StoreServerThread ------------------------------------------------------------------------

class StoreServerThread::Impl {
 public:
  explicit Impl(StoreServerOptions options) : server_(io_, std::move(options)) {
    server_.start();
    thread_ = std::thread([this] { run(); });
  }

  ~Impl() { stop(); }

  uint16_t port() const { return server_.port(); }
  ServerStats stats() const { return server_.stats(); }

  void stop() {
    if (!thread_.joinable()) return;
    server_.stop();
    thread_.join();
  }

 private:
  void run() {
    try {
      io_.run();
    } catch (const std::exception& e) {
      logger("store")->error("store server thread failed: {}", e.what());
    }
  }

  asio::io_context io_{1};  // one thread runs it; post() from others stays safe
  StoreServer server_;
  std::thread thread_;
};

StoreServerThread::StoreServerThread(StoreServerOptions options)
    : impl_(std::make_unique<Impl>(std::move(options))) {}

StoreServerThread::~StoreServerThread() = default;

uint16_t StoreServerThread::port() const { return impl_->port(); }

ServerStats StoreServerThread::stats() const { return impl_->stats(); }

void StoreServerThread::stop() { impl_->stop(); }

}  // namespace ddp
