#include "rendezvous/base/local_address.hpp"

#include <boost/asio/io_context.hpp>
#include <boost/asio/ip/udp.hpp>

#include "rendezvous/base/error.hpp"

namespace ddp {

std::string localAddressTowards(const std::string& host, uint16_t port) {
  namespace ip = boost::asio::ip;
  boost::asio::io_context io;
  ip::udp::resolver resolver(io);
  boost::system::error_code ec;
  auto results = resolver.resolve(host, std::to_string(port), ec);
  if (ec || results.empty()) {
    throw ConfigError("cannot resolve '" + host + "': " + ec.message());
  }
  std::string lastError;
  for (const auto& entry : results) {
    ip::udp::socket socket(io);
    socket.open(entry.endpoint().protocol(), ec);
    if (!ec) socket.connect(entry.endpoint(), ec);
    if (!ec) {
      auto local = socket.local_endpoint(ec);
      if (!ec) return local.address().to_string();
    }
    lastError = entry.endpoint().address().to_string() + ": " + ec.message();
  }
  throw ConfigError("no route from this host to MASTER_ADDR '" + host + "' (" + lastError + ")");
}

}  // namespace ddp
