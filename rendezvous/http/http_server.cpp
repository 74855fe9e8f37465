#include "rendezvous/http/http_server.hpp"

#include <mutex>
#include <optional>
#include <thread>
#include <unordered_set>

#include <boost/asio/ip/tcp.hpp>
#include <boost/asio/ip/v6_only.hpp>
#include <boost/asio/post.hpp>
#include <boost/asio/steady_timer.hpp>
#include <boost/beast/core.hpp>
#include <boost/beast/http.hpp>

#include "rendezvous/base/endpoint.hpp"
#include "rendezvous/base/error.hpp"
#include "rendezvous/base/fd_limit.hpp"
#include "rendezvous/base/logging.hpp"
#include "rendezvous/server/listen_address.hpp"

namespace ddp {
namespace asio = boost::asio;
namespace beast = boost::beast;
namespace http = beast::http;
using asio::ip::tcp;

namespace {

constexpr std::size_t kHeaderLimit = 8 * 1024;

}  // namespace

class HttpServer::Impl : public std::enable_shared_from_this<Impl> {
 public:
  Impl(HttpServerOptions options, HttpHandler handler)
      : options_(std::move(options)), handler_(std::move(handler)), acceptor_(io_), retry_(io_) {
    listen();
  }

  void start() {
    accept();
    thread_ = std::thread([self = shared_from_this()] { self->run(); });
  }

  void stop() {
    asio::post(io_, [this] {
      stopped_ = true;
      boost::system::error_code ignored;
      acceptor_.close(ignored);
      retry_.cancel();
      for (auto* stream : open_) stream->socket().close(ignored);
    });
    if (thread_.joinable()) thread_.join();
  }

  uint16_t port() const { return port_; }
  const std::string& address() const { return address_; }

 private:
  class Session;

  void listen() {
    openListener(acceptor_, resolveListenAddress(io_, options_.host, options_.port, "status"),
                 options_.name, {});
    acceptor_.non_blocking(true);  // accept() after async_wait: would_block when another took it
    port_ = acceptor_.local_endpoint().port();
    address_ = formatSocketEndpoint(acceptor_.local_endpoint());
  }

  void run() {
    try {
      io_.run();
    } catch (const std::exception& e) {
      logger("store")->error("{}: the HTTP server stopped: {}", options_.name, e.what());
    }
  }

  void accept();
  HttpReply answer(const http::request<http::empty_body>& request);

  HttpServerOptions options_;
  HttpHandler handler_;
  asio::io_context io_{1};
  tcp::acceptor acceptor_;
  asio::steady_timer retry_;  // after a failed accept (EMFILE): try again a little later
  std::thread thread_;
  uint16_t port_ = 0;
  std::string address_;
  bool stopped_ = false;
  std::unordered_set<beast::tcp_stream*> open_;  // io thread only
};

// One connection: read a request, answer it, repeat while the client keeps the connection alive.
class HttpServer::Impl::Session : public std::enable_shared_from_this<Session> {
 public:
  Session(tcp::socket socket, std::shared_ptr<Impl> server)
      : stream_(std::move(socket)), server_(std::move(server)) {
    server_->open_.insert(&stream_);
  }
  ~Session() { server_->open_.erase(&stream_); }

  void read() {
    parser_.emplace();
    parser_->header_limit(kHeaderLimit);
    parser_->body_limit(0);
    stream_.expires_after(server_->options_.requestTimeout);
    http::async_read(stream_, buffer_, *parser_,
                     [self = shared_from_this()](beast::error_code ec, std::size_t) {
                       self->onRead(ec);
                     });
  }

 private:
  void onRead(beast::error_code ec) {
    if (server_->stopped_) return;
    if (ec) {  // closed or timed out: drop the connection; malformed: say why first
      if (ec.category() == http::make_error_code(http::error::bad_method).category()) {
        const bool tooBig = ec == http::error::header_limit || ec == http::error::body_limit;
        refuse(tooBig ? 431 : 400, "bad request: " + ec.message() + "\n");
      }
      return;
    }
    const auto& request = parser_->get();
    HttpReply reply = server_->answer(request);
    auto response = std::make_shared<http::response<http::string_body>>();
    response->version(request.version());
    response->result(reply.status);
    response->set(http::field::server, "ddprun");
    response->set(http::field::content_type, reply.contentType);
    response->set(http::field::cache_control, "no-store");
    response->set("X-Content-Type-Options", "nosniff");
    for (const auto& [name, value] : reply.headers) response->set(name, value);
    response->keep_alive(request.keep_alive());
    const bool head = request.method() == http::verb::head;
    response->body() = std::move(reply.body);
    response->prepare_payload();
    if (head) response->body().clear();
    response_ = response;
    stream_.expires_after(server_->options_.requestTimeout);
    http::async_write(stream_, *response_,
                      [self = shared_from_this(), keep = response_->keep_alive()](
                          beast::error_code e, std::size_t) {
                        if (e || self->server_->stopped_) return;
                        if (!keep) {
                          beast::error_code ignored;
                          self->stream_.socket().shutdown(tcp::socket::shutdown_send, ignored);
                          return;
                        }
                        self->read();
                      });
  }

  // Answers a request that could not be read, then closes the connection.
  void refuse(unsigned status, std::string text) {
    auto response = std::make_shared<http::response<http::string_body>>();
    response->version(11);
    response->result(status);
    response->set(http::field::content_type, "text/plain; charset=utf-8");
    response->keep_alive(false);
    response->body() = std::move(text);
    response->prepare_payload();
    response_ = response;
    http::async_write(stream_, *response_,
                      [self = shared_from_this()](beast::error_code, std::size_t) {
                        beast::error_code ignored;
                        self->stream_.socket().shutdown(tcp::socket::shutdown_both, ignored);
                      });
  }

  beast::tcp_stream stream_;
  std::shared_ptr<Impl> server_;
  beast::flat_buffer buffer_{kHeaderLimit};
  std::optional<http::request_parser<http::empty_body>> parser_;
  std::shared_ptr<http::response<http::string_body>> response_;
};

// Waits for a client, then accepts it under spareDescriptorMutex() (fd_limit.hpp): a store server
// in this process that is out of descriptors keeps its spare for the clients it must refuse.
void HttpServer::Impl::accept() {
  acceptor_.async_wait(tcp::acceptor::wait_read, [self = shared_from_this()](beast::error_code ec) {
    if (self->stopped_ || ec == asio::error::operation_aborted) return;
    tcp::socket socket(self->io_);
    if (!ec) {
      std::lock_guard<std::mutex> lock(spareDescriptorMutex());
      self->acceptor_.accept(socket, ec);  // non-blocking (listen)
    }
    if (ec == asio::error::would_block || ec == asio::error::try_again) return self->accept();
    if (ec) {
      self->retry_.expires_after(std::chrono::milliseconds(100));
      self->retry_.async_wait([self](beast::error_code e) {
        if (!e && !self->stopped_) self->accept();
      });
      return;
    }
    {
      if (self->open_.size() >= self->options_.maxConnections) {
        boost::system::error_code ignored;
        socket.close(ignored);
      } else {
        std::make_shared<Session>(std::move(socket), self)->read();
      }
    }
    self->accept();
  });
}

HttpReply HttpServer::Impl::answer(const http::request<http::empty_body>& request) {
  if (request.method() != http::verb::get && request.method() != http::verb::head) {
    HttpReply reply{405, "text/plain; charset=utf-8", "only GET and HEAD are served\n", {}};
    reply.headers.emplace_back("Allow", "GET, HEAD");
    return reply;
  }
  try {
    return handler_(std::string(request.target()));
  } catch (const std::exception& e) {
    return {500, "text/plain; charset=utf-8", std::string("status unavailable: ") + e.what() + "\n",
            {}};
  }
}

HttpServer::HttpServer(HttpServerOptions options, HttpHandler handler)
    : impl_(std::make_shared<Impl>(std::move(options), std::move(handler))) {
  impl_->start();
}

HttpServer::~HttpServer() { impl_->stop(); }

uint16_t HttpServer::port() const { return impl_->port(); }

std::string HttpServer::address() const { return impl_->address(); }

}  // namespace ddp
