#include "launcher/rendezvous/admission_probe.hpp"

#include <netdb.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

#include "rendezvous/base/local_address.hpp"
#include "rendezvous/wire/wire_codec.hpp"

namespace ddp {
namespace {

using Clock = std::chrono::steady_clock;

int msLeft(Clock::time_point deadline) {
  const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(deadline - Clock::now());
  return left.count() > 0 ? static_cast<int>(left.count()) : 0;
}

// Waits for `events` on `fd` until `deadline`; false on timeout.
bool awaitFd(int fd, short events, Clock::time_point deadline) {
  pollfd p{fd, events, 0};
  while (true) {
    const int rc = ::poll(&p, 1, msLeft(deadline));
    if (rc > 0) return true;
    if (rc == 0 || errno != EINTR) return false;
  }
}

std::string numeric(const sockaddr* sa, socklen_t len) {
  char host[NI_MAXHOST] = {0};
  if (::getnameinfo(sa, len, host, sizeof(host), nullptr, 0, NI_NUMERICHOST) != 0) return "";
  return host;
}

// A connected non-blocking socket to `ai`, or -1 with `error` set.
int connectTo(const addrinfo& ai, Clock::time_point deadline, std::string& error) {
  const int fd = ::socket(ai.ai_family, ai.ai_socktype | SOCK_NONBLOCK | SOCK_CLOEXEC, ai.ai_protocol);
  if (fd < 0) {
    error = std::strerror(errno);
    return -1;
  }
  int rc = ::connect(fd, ai.ai_addr, ai.ai_addrlen);
  if (rc != 0 && errno == EINPROGRESS) {
    int soError = ETIMEDOUT;
    socklen_t len = sizeof(soError);
    if (awaitFd(fd, POLLOUT, deadline)) ::getsockopt(fd, SOL_SOCKET, SO_ERROR, &soError, &len);
    rc = soError == 0 ? 0 : -1;
    errno = soError;
  }
  if (rc != 0) {
    error = std::strerror(errno);
    ::close(fd);
    return -1;
  }
  return fd;
}

// Sends the handshake and reads the echo on a connected socket.
void ask(int fd, Clock::time_point deadline, AdmissionProbe& probe) {
  constexpr uint32_t kNonce = 0x64647270;  // "pdrd"
  std::string request;
  wire::Request validate;
  validate.op = wire::Op::kValidate;
  validate.nonce = wire::kValidateMagic;
  wire::encodeRequest(request, wire::Dialect::kV2, validate);
  wire::Request ping;
  ping.op = wire::Op::kPing;
  ping.nonce = kNonce;
  wire::encodeRequest(request, wire::Dialect::kV2, ping);
  if (::send(fd, request.data(), request.size(), MSG_NOSIGNAL) != static_cast<ssize_t>(request.size())) {
    probe.outcome = errno == EPIPE || errno == ECONNRESET ? AdmissionOutcome::kRefused
                                                          : AdmissionOutcome::kUnreachable;
    probe.detail = std::string("sending the handshake: ") + std::strerror(errno);
    return;
  }
  char reply[4];
  size_t got = 0;
  while (got < sizeof(reply)) {
    if (!awaitFd(fd, POLLIN, deadline)) {
      probe.detail = "no answer in time";
      return;
    }
    const ssize_t n = ::recv(fd, reply + got, sizeof(reply) - got, 0);
    if (n > 0) {
      got += static_cast<size_t>(n);
    } else if (n == 0 || errno == ECONNRESET) {
      probe.outcome = AdmissionOutcome::kRefused;
      probe.detail = "closed without answering";
      return;
    } else if (errno != EINTR && errno != EAGAIN) {
      probe.detail = std::strerror(errno);
      return;
    }
  }
  probe.outcome = AdmissionOutcome::kServed;
  probe.detail = "answered";
}

}  // namespace

AdmissionProbe probeAdmission(const std::string& addr, uint16_t port,
                              std::chrono::milliseconds budget) {
  const auto deadline = Clock::now() + budget;
  AdmissionProbe probe;
  const AddressList list = resolveTcp(addr, port, probe.detail);
  if (!list) return probe;
  for (const addrinfo* ai = list.get(); ai != nullptr && probe.outcome != AdmissionOutcome::kServed; ai = ai->ai_next) {
    const int fd = connectTo(*ai, deadline, probe.detail);
    if (fd < 0) continue;
    sockaddr_storage local{};
    socklen_t len = sizeof(local);
    if (::getsockname(fd, reinterpret_cast<sockaddr*>(&local), &len) == 0) {
      probe.sourceAddr = numeric(reinterpret_cast<const sockaddr*>(&local), len);
    }
    ask(fd, deadline, probe);
    ::close(fd);
    if (probe.outcome == AdmissionOutcome::kRefused) break;
  }
  return probe;
}

std::string refusalAdvice(const AdmissionProbe& probe, const std::string& target) {
  const std::string from = probe.sourceAddr.empty() ? "this node's address" : probe.sourceAddr;
  return "node rank 0's worker store at " + target +
         " refused this node's connection (it closed it without answering): its address "
         "allowlist does not hold the address this node connects from (" + from +
         ", unless NAT rewrites it: node rank 0's log names the address it saw), so this node's "
         "workers cannot reach it. Widen the allowlist with --rdzv-conf store_allow=" + from +
         " (or a CIDR block) on every node (any node may become node rank 0), or give this node "
         "an address node rank 0 serves with --local-addr";
}

}  // namespace ddp
