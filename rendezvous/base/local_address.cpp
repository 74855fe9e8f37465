#include "rendezvous/base/local_address.hpp"

#include <ifaddrs.h>
#include <unistd.h>
#include <netinet/in.h>

#include <boost/asio/io_context.hpp>
#include <boost/asio/ip/tcp.hpp>
#include <boost/asio/ip/udp.hpp>

#include <algorithm>

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

namespace {

bool canBind(const char* addr) {
  namespace ip = boost::asio::ip;
  boost::asio::io_context io;
  boost::system::error_code ec;
  const ip::tcp::endpoint endpoint(ip::make_address(addr, ec), 0);
  if (ec) return false;
  ip::tcp::socket socket(io);
  socket.open(endpoint.protocol(), ec);
  if (!ec) socket.bind(endpoint, ec);
  return !ec;
}

}  // namespace

std::string loopbackAddress() {
  static const std::string address = [] {
    if (canBind("127.0.0.1") || !canBind("::1")) return std::string("127.0.0.1");
    return std::string("::1");
  }();
  return address;
}

std::vector<std::string> interfaceAddresses(size_t limit) {
  namespace ip = boost::asio::ip;
  std::vector<std::string> out;
  ifaddrs* list = nullptr;
  if (::getifaddrs(&list) != 0) return out;
  for (ifaddrs* it = list; it != nullptr && out.size() < limit; it = it->ifa_next) {
    if (it->ifa_addr == nullptr) continue;
    ip::address addr;
    if (it->ifa_addr->sa_family == AF_INET) {
      const auto* sin = reinterpret_cast<const sockaddr_in*>(it->ifa_addr);
      const uint32_t v4 = ntohl(sin->sin_addr.s_addr);
      if ((v4 & 0xFFFF0000u) == 0xA9FE0000u) continue;  // 169.254/16: link-local
      addr = ip::address_v4(v4);
    } else if (it->ifa_addr->sa_family == AF_INET6) {
      const auto* sin6 = reinterpret_cast<const sockaddr_in6*>(it->ifa_addr);
      ip::address_v6::bytes_type bytes;
      std::copy(sin6->sin6_addr.s6_addr, sin6->sin6_addr.s6_addr + 16, bytes.begin());
      const ip::address_v6 v6(bytes);
      if (v6.is_link_local()) continue;  // never the source towards another host's global address
      addr = v6;
    } else {
      continue;
    }
    const std::string text = addr.to_string();
    if (addr.is_loopback() || std::find(out.begin(), out.end(), text) != out.end()) continue;
    out.push_back(text);
  }
  ::freeifaddrs(list);
  return out;
}

std::string hostName() {
  char buf[256] = {0};
  if (::gethostname(buf, sizeof(buf) - 1) != 0 || buf[0] == '\0') return "localhost";
  return buf;
}

AddressList resolveTcp(const std::string& host, uint16_t port, std::string& error) {
  addrinfo hints{};
  hints.ai_family = AF_UNSPEC;
  hints.ai_socktype = SOCK_STREAM;
  hints.ai_flags = AI_NUMERICSERV;
  addrinfo* list = nullptr;
  if (const int rc = ::getaddrinfo(host.c_str(), std::to_string(port).c_str(), &hints, &list); rc != 0) {
    error = std::string("cannot resolve: ") + ::gai_strerror(rc);
    return AddressList(nullptr, ::freeaddrinfo);
  }
  return AddressList(list, ::freeaddrinfo);
}

}  // namespace ddp
