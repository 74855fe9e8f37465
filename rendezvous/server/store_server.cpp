#include "rendezvous/server/store_server.hpp"

#include <thread>
#include <vector>

#include <boost/asio/ip/tcp.hpp>
#include <boost/asio/ip/v6_only.hpp>
#include <boost/asio/post.hpp>
#include <boost/asio/steady_timer.hpp>

#include "rendezvous/security/tls_context.hpp"
#include "rendezvous/server/detail/admission.hpp"
#include "rendezvous/server/detail/server_core.hpp"
#include "rendezvous/server/detail/store_session.hpp"
#include "rendezvous/base/error.hpp"
#include "rendezvous/base/logging.hpp"

namespace ddp {
namespace asio = boost::asio;
using asio::ip::tcp;

namespace {

std::string formatEndpoint(const tcp::endpoint& ep) {
  const auto addr = ep.address();
  if (addr.is_v6()) return "[" + addr.to_string() + "]:" + std::to_string(ep.port());
  return addr.to_string() + ":" + std::to_string(ep.port());
}

std::string stripBrackets(const std::string& host) {
  if (host.size() >= 2 && host.front() == '[' && host.back() == ']') {
    return host.substr(1, host.size() - 2);
  }
  return host;
}

tcp::endpoint resolveEndpoint(asio::io_context& io, const std::string& rawHost, uint16_t port) {
  const std::string host = stripBrackets(rawHost);
  boost::system::error_code ec;
  const auto addr = asio::ip::make_address(host, ec);
  if (!ec) return {addr, port};
  tcp::resolver resolver(io);
  const auto results = resolver.resolve(host, std::to_string(port), ec);
  if (ec || results.empty()) {
    throw NetworkError("cannot resolve the store server address '" + rawHost +
                       "': " + (ec ? ec.message() : std::string("no addresses")));
  }
  return results.begin()->endpoint();
}

// "TLS, mutual; token required (plain from 10.0.0.0/8); clients from 127.0.0.0/8, ::1/128".
std::string securitySummary(const StoreServerOptions& o) {
  std::string out = !o.tls.enabled() ? "plain TCP" : o.tls.caFile.empty() ? "TLS" : "TLS, mutual";
  if (!o.token.empty()) {
    out += "; token required";
    if (!o.allowUnauthenticated.empty()) out += " (not from " + o.allowUnauthenticated.describe() + ")";
  }
  out += "; clients from " + o.allow.describe();
  if (o.sameUserLocalPeers) out += ", local ones of this user only";
  return out;
}

}  // namespace

class StoreServer::Impl : public std::enable_shared_from_this<Impl> {
 public:
  Impl(asio::io_context& io, StoreServerOptions options)
      : io_(io),
        acceptor_(io),
        retryTimer_(io),
        core_(std::make_shared<detail::ServerCore>(std::move(options))) {
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
      self->core_->state.snapshot(budget, out);
      out.cost = std::chrono::steady_clock::now() - out.takenAt;
      done(std::move(out));
    });
  }

 private:
  void listen() {
    const auto& opts = core_->options;
    auto endpoint = resolveEndpoint(io_, opts.host, opts.port);
    boost::system::error_code ec;
    bindTo(endpoint, ec);
    // A kernel without IPv6 cannot open "::"; the IPv4 wildcard is the closest equivalent.
    if (ec == asio::error::address_family_not_supported && stripBrackets(opts.host) == "::") {
      core_->log->warn("{}: IPv6 is unavailable ({}); listening on 0.0.0.0 instead", opts.name,
                       ec.message());
      endpoint = tcp::endpoint(asio::ip::address_v4::any(), opts.port);
      bindTo(endpoint, ec);
    }
    if (ec) {
      throw NetworkError("cannot listen on " + formatEndpoint(endpoint) + " (" + opts.name +
                         "): " + ec.message());
    }
    const auto local = acceptor_.local_endpoint();
    port_ = local.port();
    address_ = formatEndpoint(local);
    core_->log->info("{}: listening on {} ({})", opts.name, address_, securitySummary(opts));
  }

  void bindTo(const tcp::endpoint& endpoint, boost::system::error_code& ec) {
    boost::system::error_code ignored;
    acceptor_.close(ignored);
    acceptor_.open(endpoint.protocol(), ec);
    if (ec) return;
    // SO_REUSEADDR only (restart while old connections sit in TIME_WAIT); never SO_REUSEPORT,
    // so a co-located torchrun agent's own bind attempt fails and it falls back to a client.
    acceptor_.set_option(tcp::acceptor::reuse_address(true), ignored);
    if (endpoint.address().is_v6()) acceptor_.set_option(asio::ip::v6_only(false), ignored);
    acceptor_.bind(endpoint, ec);
    if (ec) return;
    acceptor_.listen(asio::socket_base::max_listen_connections, ec);
    if (!ec) acceptor_.non_blocking(true, ec);
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
      // Typically EMFILE: back off briefly instead of spinning on the failing accept.
      core_->warn("accept failed: " + ec.message());
      retryTimer_.expires_after(std::chrono::milliseconds(100));
      retryTimer_.async_wait([self = shared_from_this()](const boost::system::error_code& e) {
        if (self->core_->stopped || e) return;
        self->accept();
      });
      return;
    }
    admit(std::move(socket));
    // Drain the rest of the backlog without a trip through the event loop per connection: when
    // thousands of ranks connect at once this keeps the kernel's accept queue from overflowing.
    for (int i = 0; i < kAcceptBatch; ++i) {
      boost::system::error_code more;
      tcp::socket next(io_);
      acceptor_.accept(next, more);  // non-blocking (see bindTo): would_block ends the batch
      if (more) break;
      admit(std::move(next));
    }
    accept();
  }

  void admit(tcp::socket socket) {
    const auto& opts = core_->options;
    boost::system::error_code ignored;
    // Connections still in their TLS handshake count: they hold a socket and memory too.
    if (core_->sessions.size() + core_->handshaking.size() >= opts.maxConnections) {
      detail::bump(core_->counters.refused);
      ++core_->storeStats.connectionsRefused;
      core_->warn("refusing a connection: " + std::to_string(opts.maxConnections) +
                  " connections are open (--max-connections)");
      socket.close(ignored);
      return;
    }
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
    detail::cancelAdmissions(*core_);
    const std::vector<detail::StoreSession*> open(core_->sessions.begin(), core_->sessions.end());
    for (auto* session : open) session->close("");
    core_->flushWarnings();
    core_->log->info("{}: stopped ({} keys held)", core_->options.name, core_->state.numKeys());
  }

  static constexpr int kAcceptBatch = 64;

  asio::io_context& io_;
  tcp::acceptor acceptor_;
  asio::steady_timer retryTimer_;
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
