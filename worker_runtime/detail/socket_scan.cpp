#include "worker_runtime/detail/socket_scan.hpp"

#include <dirent.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cstdlib>
#include <cstring>
#include <exception>
#include <map>
#include <set>
#include <string>

namespace ddp::detail {
namespace {

std::set<int> openedSince(const SocketTable& before) {
  std::set<uint64_t> old;
  for (const auto& [fd, inode] : before) old.insert(inode);
  std::set<int> opened;
  for (const auto& [fd, inode] : socketDescriptors()) {
    if (!old.count(inode)) opened.insert(fd);
  }
  return opened;
}

// The port of an IPv4 or IPv6 address; 0 for any other family.
uint16_t portOf(const sockaddr_storage& a) {
  if (a.ss_family == AF_INET) return ntohs(reinterpret_cast<const sockaddr_in*>(&a)->sin_port);
  if (a.ss_family == AF_INET6) return ntohs(reinterpret_cast<const sockaddr_in6*>(&a)->sin6_port);
  return 0;
}

// Connected TCP sockets with the store's port at neither end: not a store client's connection,
// and not the store server's end of one (a process that hosts the store, as a test does).
std::vector<int> pairSockets(const std::set<int>& fds, uint16_t storePort) {
  std::vector<int> out;
  for (int fd : fds) {
    sockaddr_storage peer{};
    sockaddr_storage self{};
    socklen_t peerLen = sizeof(peer);
    socklen_t selfLen = sizeof(self);
    if (::getpeername(fd, reinterpret_cast<sockaddr*>(&peer), &peerLen) != 0) continue;  // listener
    if (::getsockname(fd, reinterpret_cast<sockaddr*>(&self), &selfLen) != 0) continue;
    const uint16_t peerPort = portOf(peer);
    if (peerPort == 0) continue;  // not IP
    if (peerPort != storePort && portOf(self) != storePort) out.push_back(fd);
  }
  return out;
}

// The socket's TCP state and SYN retransmissions; false when it is no TCP socket.
bool tcpInfo(int fd, tcp_info& info) {
  socklen_t len = sizeof(info);
  return ::getsockopt(fd, IPPROTO_TCP, TCP_INFO, &info, &len) == 0;
}

const char* stateName(uint8_t state) {
  switch (state) {
    case TCP_ESTABLISHED: return "ESTABLISHED";
    case TCP_SYN_SENT: return "SYN-SENT";
    case TCP_SYN_RECV: return "SYN-RECV";
    case TCP_FIN_WAIT1: return "FIN-WAIT-1";
    case TCP_FIN_WAIT2: return "FIN-WAIT-2";
    case TCP_TIME_WAIT: return "TIME-WAIT";
    case TCP_CLOSE: return "CLOSE";
    case TCP_CLOSE_WAIT: return "CLOSE-WAIT";
    case TCP_LAST_ACK: return "LAST-ACK";
    case TCP_LISTEN: return "LISTEN";
    case TCP_CLOSING: return "CLOSING";
    default: return "?";
  }
}

}  // namespace

SocketTable socketDescriptors() {
  SocketTable out;
  DIR* dir = ::opendir("/proc/self/fd");
  if (dir == nullptr) return out;
  while (dirent* e = ::readdir(dir)) {
    char* end = nullptr;
    const long fd = std::strtol(e->d_name, &end, 10);
    if (end == e->d_name || *end != '\0' || fd == ::dirfd(dir)) continue;
    char target[64] = {};
    const std::string link = std::string("/proc/self/fd/") + e->d_name;
    // "socket:[<inode>]"
    if (::readlink(link.c_str(), target, sizeof(target) - 1) > 0 &&
        std::strncmp(target, "socket:[", 8) == 0) {
      out[static_cast<int>(fd)] = std::strtoull(target + 8, nullptr, 10);
    }
  }
  ::closedir(dir);
  return out;
}


std::vector<int> connectionsOpenedSince(const SocketTable& before, uint16_t storePort) {
  return pairSockets(openedSince(before), storePort);
}

std::vector<int> listenersOpenedSince(const SocketTable& before) {
  std::vector<int> out;
  for (int fd : openedSince(before)) {
    int listening = 0;
    socklen_t size = sizeof(listening);
    sockaddr_storage self{};
    socklen_t selfLen = sizeof(self);
    if (::getsockopt(fd, SOL_SOCKET, SO_ACCEPTCONN, &listening, &size) == 0 && listening &&
        ::getsockname(fd, reinterpret_cast<sockaddr*>(&self), &selfLen) == 0 &&
        (self.ss_family == AF_INET || self.ss_family == AF_INET6)) {
      out.push_back(fd);
    }
  }
  return out;
}

int shutDownStalledConnects(const SocketTable& before) noexcept {
  int shut = 0;
  try {
    for (int fd : openedSince(before)) {
      tcp_info info{};
      if (!tcpInfo(fd, info) || info.tcpi_state != TCP_SYN_SENT || info.tcpi_retransmits < 1) {
        continue;
      }
      if (::shutdown(fd, SHUT_RDWR) == 0) ++shut;
    }
  } catch (const std::exception&) {
    // Out of memory for the scan: nothing more is shut down.
  }
  return shut;
}

std::string tcpStatesOpenedSince(const SocketTable& before) {
  std::map<std::string, int> counts;
  for (int fd : openedSince(before)) {
    tcp_info info{};
    if (tcpInfo(fd, info)) ++counts[stateName(info.tcpi_state)];
  }
  std::string out;
  for (const auto& [state, n] : counts) {
    out += (out.empty() ? "" : ", ") + state + " " + std::to_string(n);
  }
  return out.empty() ? "none" : out;
}

void shutDown(const std::vector<int>& fds) noexcept {
  for (int fd : fds) ::shutdown(fd, SHUT_RDWR);
}

SocketTable identify(const std::vector<int>& fds) {
  SocketTable out;
  for (int fd : fds) {
    struct stat st{};
    if (::fstat(fd, &st) == 0 && S_ISSOCK(st.st_mode)) out[fd] = uint64_t(st.st_ino);
  }
  return out;
}

void shutDownSame(const SocketTable& sockets) noexcept {
  for (const auto& [fd, inode] : sockets) {
    struct stat st{};
    if (::fstat(fd, &st) == 0 && S_ISSOCK(st.st_mode) && uint64_t(st.st_ino) == inode) {
      ::shutdown(fd, SHUT_RDWR);
    }
  }
}

}  // namespace ddp::detail
