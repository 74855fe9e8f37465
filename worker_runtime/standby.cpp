#include "worker_runtime/standby.hpp"

#include <fcntl.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <cstdint>
#include <cstdlib>
#include <cstring>

#include "rendezvous/base/error.hpp"
#include "rendezvous/quorum/standby_message.hpp"

namespace ddp {
namespace {

std::atomic<bool> capable{false};

void readFully(int fd, char* out, std::size_t n, const std::string& path) {
  while (n > 0) {
    const ssize_t got = ::read(fd, out, n);
    if (got < 0 && errno == EINTR) continue;
    if (got <= 0) {
      throw ConfigError("standby: the agent's message on " + path + " ended early" +
                        (got < 0 ? std::string(" (") + std::strerror(errno) + ")" : ""));
    }
    out += got;
    n -= std::size_t(got);
  }
}

}  // namespace

bool startedAsStandby() { return std::getenv(kStandbyEnv) != nullptr; }

bool standbyCapable() { return capable.load(); }

bool awaitStandbyAssignment() {
  capable = true;
  const char* fifo = std::getenv(kStandbyEnv);
  if (fifo == nullptr) return false;
  const std::string path = fifo;
  const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) {
    throw ConfigError("standby: cannot open " + path + ": " + std::strerror(errno));
  }
  std::string payload;
  try {
    unsigned char header[kStandbyHeaderBytes];
    readFully(fd, reinterpret_cast<char*>(header), sizeof header, path);
    const uint64_t n = standbyMessageLength(header);
    if (n > kMaxStandbyMessage) {
      throw ConfigError("standby: the agent's message claims " + std::to_string(n) +
                        " bytes (at most " + std::to_string(kMaxStandbyMessage) + ")");
    }
    payload.resize(std::size_t(n));
    readFully(fd, payload.data(), payload.size(), path);
  } catch (...) {
    ::close(fd);
    throw;
  }
  ::close(fd);
  const auto env = decodeStandbyMessage(payload);
  ::clearenv();
  for (const auto& [name, value] : env) ::setenv(name.c_str(), value.c_str(), 1);
  return true;
}

}  // namespace ddp
