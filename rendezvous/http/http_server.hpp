// HttpServer: a small read-only HTTP/1.1 server (Boost.Beast) on its own thread, for the status
// pages of ddprund and the agent (docs/status.md).
//
// It answers GET and HEAD only (405 otherwise), with the handler's reply for the request's path
// (the query string is passed along). Requests are bounded: headers at most 8 KiB (431), no body
// accepted, 10 s to send a request, at most `maxConnections` open at once (more are closed at
// once); keep-alive is honoured. A request that cannot be parsed gets a one-line 400 naming why,
// and its connection is closed; everyone else is served on. Every reply carries `Cache-Control: no-store` and
// `X-Content-Type-Options: nosniff`; the handler may add a Content-Security-Policy.
//
// The handler runs on the server's own thread and may block (a status read): while it does,
// other HTTP clients wait, and nothing else does — the store's io thread never runs HTTP code.
//
// Thread safety: construct and destroy from one thread; the handler is called on the server's
// thread only, one request at a time.
#pragma once

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <vector>

namespace ddp {

struct HttpServerOptions {
  // Address to bind; "::" is dual-stack (falls back to 0.0.0.0 without IPv6).
  std::string host = "127.0.0.1";
  // Port; 0 picks a free one (read it back with port()).
  uint16_t port = 0;
  // Name used in log lines ("ddprund status", "agent status").
  std::string name = "status";
  // Most simultaneous connections.
  std::size_t maxConnections = 64;
  // How long a connection may take to send one request (and idle between requests).
  std::chrono::milliseconds requestTimeout{std::chrono::seconds(10)};
};

struct HttpReply {
  unsigned status = 200;
  std::string contentType = "text/plain; charset=utf-8";
  std::string body;
  std::vector<std::pair<std::string, std::string>> headers;  // extra headers
};

// `target` is the request target as sent ("/metrics", "/status?x=1").
using HttpHandler = std::function<HttpReply(const std::string& target)>;

class HttpServer {
 public:
  // Binds and starts serving on a thread of its own. Throws NetworkError naming the address when
  // the bind fails.
  HttpServer(HttpServerOptions options, HttpHandler handler);
  // Stops accepting, closes every connection and joins the thread.
  ~HttpServer();
  HttpServer(const HttpServer&) = delete;
  HttpServer& operator=(const HttpServer&) = delete;

  uint16_t port() const;
  // "127.0.0.1:8080" or "[::]:29401".
  std::string address() const;

 private:
  class Impl;
  std::shared_ptr<Impl> impl_;
};

}  // namespace ddp
