#include "rendezvous/store/detail/etcd_http_stream.hpp"

#include <boost/asio/ip/tcp.hpp>
#include <boost/beast/http/read.hpp>
#include <boost/beast/http/write.hpp>
#include <openssl/ssl.h>
#include <openssl/x509v3.h>


namespace ddp::detail {

namespace asio = boost::asio;
namespace beast = boost::beast;
namespace http = beast::http;

EtcdHttpStream::EtcdHttpStream(const EtcdEndpoint& endpoint, std::shared_ptr<asio::ssl::context> tls)
    : endpoint_(endpoint), tls_(std::move(tls)) {
  if (endpoint_.tls) {
    stream_ = std::make_unique<Tls>(io_, *tls_);
  } else {
    stream_ = std::make_unique<Plain>(io_);
  }
}

EtcdHttpStream::~EtcdHttpStream() = default;

template <class Start>
beast::error_code EtcdHttpStream::run(Clock::time_point deadline, Start start) {
  beast::error_code ec;
  std::visit(
      [&](auto& stream) {
        beast::get_lowest_layer(*stream).expires_at(deadline);
        start(*stream, [&](beast::error_code e, std::size_t = 0) { ec = e; });
      },
      stream_);
  io_.restart();
  io_.run();
  return ec;
}

beast::error_code EtcdHttpStream::connect(Clock::time_point deadline) {
  beast::error_code ec;
  asio::ip::tcp::resolver resolver(io_);
  const auto results = resolver.resolve(endpoint_.host, endpoint_.port, ec);
  if (ec) return ec;
  ec = run(deadline, [&](auto& stream, auto done) {
    beast::get_lowest_layer(stream).async_connect(
        results, [done](beast::error_code e, const asio::ip::tcp::endpoint&) mutable { done(e); });
  });
  if (ec) return ec;
  std::visit([](auto& s) {
    beast::error_code ignored;
    beast::get_lowest_layer(*s).socket().set_option(asio::ip::tcp::no_delay(true), ignored);
  }, stream_);
  if (!endpoint_.tls) return {};
  SSL* ssl = std::get<1>(stream_)->native_handle();
  // The certificate must name the endpoint: an IP SAN for an address, else the DNS name (SNI too).
  boost::system::error_code notIp;
  asio::ip::make_address(endpoint_.host, notIp);
  if (!notIp) {
    X509_VERIFY_PARAM_set1_ip_asc(SSL_get0_param(ssl), endpoint_.host.c_str());
  } else {
    X509_VERIFY_PARAM_set_hostflags(SSL_get0_param(ssl), X509_CHECK_FLAG_NO_PARTIAL_WILDCARDS);
    SSL_set_tlsext_host_name(ssl, endpoint_.host.c_str());
    SSL_set1_host(ssl, endpoint_.host.c_str());
  }
  return run(deadline, [&](auto& stream, auto done) {
    if constexpr (std::is_same_v<std::decay_t<decltype(stream)>, Tls>) {
      stream.async_handshake(asio::ssl::stream_base::client, [done](beast::error_code e) mutable { done(e); });
    }
  });
}

beast::error_code EtcdHttpStream::write(const Request& request, Clock::time_point deadline) {
  return run(deadline, [&](auto& stream, auto done) { http::async_write(stream, request, done); });
}

beast::error_code EtcdHttpStream::read(Response& response, Clock::time_point deadline) {
  return run(deadline, [&](auto& stream, auto done) { http::async_read(stream, buffer_, response, done); });
}

beast::error_code EtcdHttpStream::readHeader(Parser& parser, Clock::time_point deadline) {
  return run(deadline,
             [&](auto& stream, auto done) { http::async_read_header(stream, buffer_, parser, done); });
}

beast::error_code EtcdHttpStream::readSome(Parser& parser, Clock::time_point deadline) {
  return run(deadline,
             [&](auto& stream, auto done) { http::async_read_some(stream, buffer_, parser, done); });
}

}  // namespace ddp::detail
