// Telling a client that the server cannot serve it, instead of leaving it to time out: the busy
// notice (wire_codec.hpp) and the spare descriptor that lets a server send it even when the process
// has no descriptor left (the libev/nginx trick: close the spare, accept the pending connection,
// tell it, close it, take the spare back).
//
// Thread safety: the server's io_context thread only.
#pragma once

#include <string>

#include <boost/asio/ip/tcp.hpp>

namespace ddp::detail {

// One descriptor (/dev/null) held in reserve.
class SpareDescriptor {
 public:
  SpareDescriptor();  // takes it (none when even that fails: held() is false)
  ~SpareDescriptor();
  SpareDescriptor(const SpareDescriptor&) = delete;
  SpareDescriptor& operator=(const SpareDescriptor&) = delete;

  // Closes the spare so that one accept() can succeed. False when none was held.
  bool release();
  // Takes a spare again (none when the descriptor was taken meanwhile; the next call retries).
  void restore();
  bool held() const { return fd_ >= 0; }

 private:
  int fd_ = -1;
};

// Writes a busy notice saying `reason` without blocking, reads what the client already sent (so
// that the close sends FIN after the notice, not a reset that could discard it), and closes the
// socket. Never throws.
void sendBusyAndClose(boost::asio::ip::tcp::socket& socket, const std::string& reason);

}  // namespace ddp::detail
