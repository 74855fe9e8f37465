// closedPort(): a loopback port with nothing listening on it, for tests that connect where no
// server is (yet).
//
// The port lies below the kernel's ephemeral range (net.ipv4.ip_local_port_range), so that no
// other test's port-0 listener and no client's own source port can take it meanwhile: a client
// that keeps connecting to a closed port inside that range can be handed that very port as its
// source and connect to itself (TCP simultaneous open), and a server started there later then
// fails with "Address already in use". Bound once to check it is free, then released.
//
// Thread safety: reentrant.
#pragma once

#include <boost/asio/io_context.hpp>
#include <boost/asio/ip/tcp.hpp>
#include <cstdint>
#include <fstream>
#include <random>
#include <stdexcept>

namespace ddp::test {

inline uint16_t closedPort() {
  int low = 32768;
  std::ifstream("/proc/sys/net/ipv4/ip_local_port_range") >> low;
  const int first = 10000, last = low - 1;
  std::mt19937 pick(std::random_device{}());
  std::uniform_int_distribution<int> any(first, last > first ? last : first + 1000);
  boost::asio::io_context io;
  for (int attempt = 0; attempt < 200; ++attempt) {
    const auto port = static_cast<uint16_t>(any(pick));
    boost::asio::ip::tcp::acceptor acceptor(io);
    const boost::asio::ip::tcp::endpoint at(boost::asio::ip::make_address("127.0.0.1"), port);
    boost::system::error_code ec;
    acceptor.open(at.protocol(), ec);
    if (!ec) acceptor.bind(at, ec);
    if (!ec) return port;
  }
  throw std::runtime_error("no free loopback port below the ephemeral range");
}

}  // namespace ddp::test
