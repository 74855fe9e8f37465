#include "rendezvous/server/listen_address.hpp"

#include <boost/asio/ip/v6_only.hpp>

#include "rendezvous/base/endpoint.hpp"
#include "rendezvous/base/error.hpp"

namespace ddp {

namespace asio = boost::asio;
using asio::ip::tcp;

std::string withoutBrackets(const std::string& host) {
  if (host.size() >= 2 && host.front() == '[' && host.back() == ']') {
    return host.substr(1, host.size() - 2);
  }
  return host;
}

tcp::endpoint resolveListenAddress(asio::io_context& io, const std::string& rawHost, uint16_t port,
                                   const std::string& what) {
  const std::string host = withoutBrackets(rawHost);
  boost::system::error_code ec;
  const auto addr = asio::ip::make_address(host, ec);
  if (!ec) return {addr, port};
  tcp::resolver resolver(io);
  const auto results = resolver.resolve(host, std::to_string(port), ec);
  if (ec || results.empty()) {
    throw NetworkError("cannot resolve the " + what + " address '" + rawHost +
                       "': " + (ec ? ec.message() : std::string("no addresses")));
  }
  return results.begin()->endpoint();
}

namespace {

void bindTo(tcp::acceptor& acceptor, const tcp::endpoint& endpoint, boost::system::error_code& ec) {
  boost::system::error_code ignored;
  acceptor.close(ignored);
  acceptor.open(endpoint.protocol(), ec);
  if (ec) return;
  acceptor.set_option(tcp::acceptor::reuse_address(true), ignored);
  if (endpoint.address().is_v6()) acceptor.set_option(asio::ip::v6_only(false), ignored);
  acceptor.bind(endpoint, ec);
  if (!ec) acceptor.listen(asio::socket_base::max_listen_connections, ec);
}

}  // namespace

tcp::endpoint openListener(tcp::acceptor& acceptor, tcp::endpoint endpoint, const std::string& name,
                           const std::function<void(const std::string& why)>& onIpv4Fallback) {
  boost::system::error_code ec;
  bindTo(acceptor, endpoint, ec);
  if (ec == asio::error::address_family_not_supported && endpoint.address().is_v6() &&
      endpoint.address().is_unspecified()) {
    if (onIpv4Fallback) onIpv4Fallback(ec.message());
    endpoint = tcp::endpoint(asio::ip::address_v4::any(), endpoint.port());
    bindTo(acceptor, endpoint, ec);
  }
  if (ec) {
    throw NetworkError("cannot listen on " + formatSocketEndpoint(endpoint) + " (" + name +
                       "): " + ec.message());
  }
  return endpoint;
}

}  // namespace ddp
