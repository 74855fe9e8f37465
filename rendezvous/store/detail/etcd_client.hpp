// EtcdClient: POSTs JSON to etcd's v3 gateway (`/v3/kv/range`, `/v3/kv/txn`, `/v3/lease/...`) over
// HTTP/1.1 (Boost.Beast), plain or TLS (https:// endpoints; etcd_http_stream.hpp), with a
// deadline, failover between endpoints and retries.
//
// One keep-alive connection to the current endpoint. A request that fails with a connection error,
// a per-request timeout or an HTTP 5xx answer (etcd without a leader, restarting) is retried on
// the next endpoint after a Backoff delay, until the caller's deadline; then NetworkError lists
// every failed attempt. An HTTP 4xx answer means the request itself is wrong: ProtocolError with
// etcd's message, not retried. The gateway's quirks: int64
// fields are JSON strings, zero values are omitted, keys and values are base64.
//
// Thread safety: callers are serialised by an internal mutex, held for one attempt at a time (not
// during the backoff sleep).
#pragma once

#include <chrono>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include <boost/asio/ssl/context.hpp>
#include <boost/beast/http/message.hpp>
#include <boost/beast/http/string_body.hpp>
#include <nlohmann/json.hpp>

#include "rendezvous/base/backoff.hpp"

namespace ddp::detail {

// Standard base64 (with padding), as the gateway wants keys and values.
std::string base64Encode(std::string_view bytes);
// Throws ProtocolError naming `what` when `text` is not valid base64.
std::string base64Decode(std::string_view text, std::string_view what);

// Reads an int64 field the gateway sends as a JSON string (or a number); `fallback` when absent.
int64_t jsonInt(const nlohmann::json& object, const char* field, int64_t fallback = 0);

struct EtcdEndpoint {
  std::string host;
  std::string port;
  bool tls = false;  // https
  std::string text() const { return host + ":" + port; }
};

class EtcdClient {
 public:
  using Clock = std::chrono::steady_clock;

  // `endpoints` non-empty (ConfigError otherwise). `requestTimeout` bounds one attempt. `tls`
  // serves the https endpoints (ConfigError when one is https and `tls` is null).
  EtcdClient(std::vector<EtcdEndpoint> endpoints, std::chrono::milliseconds requestTimeout,
             BackoffOptions backoff, std::shared_ptr<boost::asio::ssl::context> tls = nullptr);
  ~EtcdClient();
  EtcdClient(const EtcdClient&) = delete;
  EtcdClient& operator=(const EtcdClient&) = delete;

  // POSTs `body` to `path` (e.g. "/v3/kv/put") and returns the parsed 200 body. Blocks until an
  // answer or `deadline`. `what` names the operation in errors ("put key /ddp/x").
  // Throws NetworkError (every attempt listed, each naming its endpoint) and ProtocolError.
  nlohmann::json post(std::string_view path, const nlohmann::json& body, Clock::time_point deadline,
                      std::string_view what);

  // "host:port" of the endpoint the next request goes to.
  std::string endpoint() const;
  // The endpoint the next request goes to (for a watch on its own connection).
  EtcdEndpoint currentEndpoint() const;
  // The TLS context of the https endpoints (null when none is https).
  const std::shared_ptr<boost::asio::ssl::context>& tlsContext() const { return tls_; }

 private:
  class Connection;
  using Request = boost::beast::http::request<boost::beast::http::string_body>;

  std::optional<nlohmann::json> attempt(Request& request, Clock::time_point deadline,
                                        std::string_view what, std::string& failure);

  std::vector<EtcdEndpoint> endpoints_;
  std::chrono::milliseconds requestTimeout_;
  BackoffOptions backoffOptions_;
  std::shared_ptr<boost::asio::ssl::context> tls_;
  mutable std::mutex mutex_;
  // Guarded by mutex_:
  std::size_t current_ = 0;
  std::unique_ptr<Connection> connection_;
};

}  // namespace ddp::detail
