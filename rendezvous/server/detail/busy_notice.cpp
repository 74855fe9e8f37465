#include "rendezvous/server/detail/busy_notice.hpp"

#include <fcntl.h>
#include <sys/socket.h>
#include <unistd.h>

#include "rendezvous/wire/wire_codec.hpp"

namespace ddp::detail {

SpareDescriptor::SpareDescriptor() { restore(); }

SpareDescriptor::~SpareDescriptor() { release(); }

bool SpareDescriptor::release() {
  if (fd_ < 0) return false;
  ::close(fd_);
  fd_ = -1;
  return true;
}

void SpareDescriptor::restore() {
  if (fd_ < 0) fd_ = ::open("/dev/null", O_RDONLY | O_CLOEXEC);
}

void sendBusyAndClose(boost::asio::ip::tcp::socket& socket, const std::string& reason) {
  std::string notice;
  wire::encodeBusyNotice(notice, reason);
  const int fd = socket.native_handle();
  (void)::send(fd, notice.data(), notice.size(), MSG_DONTWAIT | MSG_NOSIGNAL);
  char sink[4096];
  for (int i = 0; i < 16 && ::recv(fd, sink, sizeof(sink), MSG_DONTWAIT) > 0; ++i) {
  }
  ::shutdown(fd, SHUT_WR);
  boost::system::error_code ignored;
  socket.close(ignored);
}

}  // namespace ddp::detail
