// EtcdHttpStream: the connection under etcd's HTTP gateway calls (EtcdClient's keep-alive
// requests, EtcdWatch's long-lived stream) — plain TCP, or TLS for an https:// endpoint (Beast's
// ssl_stream over Boost.Asio SSL; the server's certificate checked against the CA file and the
// endpoint's host name). Blocking calls run Beast's async operations on a private io_context
// until they finish; the stream's expiry turns the deadline into beast::error::timeout.
//
// Thread safety: one thread at a time.
#pragma once

#include <chrono>
#include <memory>
#include <variant>

#include <boost/asio/io_context.hpp>
#include <boost/asio/ssl/context.hpp>
#include <boost/beast/core/flat_buffer.hpp>
#include <boost/beast/core/tcp_stream.hpp>
#include <boost/beast/http/message.hpp>
#include <boost/beast/http/parser.hpp>
#include <boost/beast/http/string_body.hpp>
#include <boost/beast/ssl/ssl_stream.hpp>

#include "rendezvous/store/detail/etcd_client.hpp"

namespace ddp::detail {

class EtcdHttpStream {
 public:
  using Clock = std::chrono::steady_clock;
  using Request = boost::beast::http::request<boost::beast::http::string_body>;
  using Response = boost::beast::http::response<boost::beast::http::string_body>;
  using Parser = boost::beast::http::response_parser<boost::beast::http::string_body>;

  // `tls` must be set for an endpoint with tls (https://), and is ignored otherwise.
  EtcdHttpStream(const EtcdEndpoint& endpoint, std::shared_ptr<boost::asio::ssl::context> tls);
  ~EtcdHttpStream();

  // Resolves, connects and (https) completes the TLS handshake. Errors as error codes:
  // beast::error::timeout at the deadline; a TLS failure carries OpenSSL's reason.
  boost::beast::error_code connect(Clock::time_point deadline);
  boost::beast::error_code write(const Request& request, Clock::time_point deadline);
  boost::beast::error_code read(Response& response, Clock::time_point deadline);
  boost::beast::error_code readHeader(Parser& parser, Clock::time_point deadline);
  boost::beast::error_code readSome(Parser& parser, Clock::time_point deadline);

 private:
  using Plain = boost::beast::tcp_stream;
  using Tls = boost::beast::ssl_stream<boost::beast::tcp_stream>;

  // Runs `start(stream, handler)` on whichever stream this is, until it completes or the
  // deadline passes.
  template <class Start>
  boost::beast::error_code run(Clock::time_point deadline, Start start);

  EtcdEndpoint endpoint_;
  boost::asio::io_context io_;
  std::shared_ptr<boost::asio::ssl::context> tls_;
  std::variant<std::unique_ptr<Plain>, std::unique_ptr<Tls>> stream_;
  boost::beast::flat_buffer buffer_;
};

}  // namespace ddp::detail
