// FakeServer: a scripted TCP server for client tests. It accepts connections on a loopback port
// and hands each, in turn, to `serve` (blocking Asio calls) on its own thread until destroyed;
// an exception in `serve` (the client hung up) just ends that connection.
//
// Thread safety: construct and destroy on one thread; `serve` runs on the server's thread.
#pragma once

#include <poll.h>

#include <atomic>
#include <cstdint>
#include <cstring>
#include <functional>
#include <thread>

#include <boost/asio/io_context.hpp>
#include <boost/asio/ip/tcp.hpp>
#include <boost/asio/read.hpp>
#include <boost/asio/write.hpp>

namespace ddp::test {

class FakeServer {
 public:
  explicit FakeServer(std::function<void(boost::asio::ip::tcp::socket&)> serve)
      : acceptor_(io_, {boost::asio::ip::make_address("127.0.0.1"), 0}), serve_(std::move(serve)) {
    acceptor_.non_blocking(true);
    thread_ = std::thread([this] { run(); });
  }
  ~FakeServer() {
    stop_ = true;
    thread_.join();
  }
  uint16_t port() const { return acceptor_.local_endpoint().port(); }

 private:
  void run() {
    while (!stop_) {
      pollfd fd{acceptor_.native_handle(), POLLIN, 0};
      if (::poll(&fd, 1, 50) <= 0) continue;
      boost::system::error_code ec;
      boost::asio::ip::tcp::socket socket(io_);
      acceptor_.accept(socket, ec);
      if (ec) continue;
      socket.non_blocking(false);
      try {
        serve_(socket);
      } catch (const std::exception&) {
        // the client hung up first: fine for a fake
      }
    }
  }

  boost::asio::io_context io_;
  boost::asio::ip::tcp::acceptor acceptor_;
  std::function<void(boost::asio::ip::tcp::socket&)> serve_;
  std::atomic<bool> stop_{false};
  std::thread thread_;
};

// Reads the v2 handshake (VALIDATE + PING) and returns the PING nonce.
uint32_t readHandshake(boost::asio::ip::tcp::socket& socket) {
  unsigned char bytes[10];
  boost::asio::read(socket, boost::asio::buffer(bytes));
  uint32_t nonce = 0;
  std::memcpy(&nonce, bytes + 6, sizeof(nonce));
  return nonce;
}

}  // namespace ddp::test
