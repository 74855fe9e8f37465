// RefusalLog: the warnings a StoreServer logs when it refuses a client (an address outside the
// allowlist, another user's local process, no token, a failed TLS handshake, no descriptor left),
// rate-limited so a scan or a misconfigured fleet cannot flood the log: at most one line per kind
// of refusal per window (5 s), which says how many refusals of that kind the previous lines left
// out. Kinds are limited apart, so a flood of one kind hides no other kind.
//
//   ddprund: refused a connection from 127.0.0.2:40112: address not in --allow (127.0.0.1/32)
//   ddprund: refused a connection from 10.0.0.9:5133: no token ... (41 more refused since the last
//            such line)
//
// Thread safety: none; the server's io_context thread owns it.
#pragma once

#include <array>
#include <chrono>
#include <cstddef>
#include <cstdint>
#include <string>

#include <spdlog/logger.h>

namespace ddp::detail {

enum class RefusalKind : uint8_t {
  kAddress,    // outside the allowlist
  kLocalUser,  // a local process of another user
  kPlain,      // plain TCP to a TLS server
  kTls,        // a TLS handshake that failed or did not come in time
  kToken,      // a request before the token, a wrong or missing token
  kUnauthenticated,  // no token in time, or closed to make room for others (unauthenticated.hpp)
  kOwnerUnknown,     // the kernel could not say which user owns a local connection
  kOverload,   // out of file descriptors, or at the connection limit (a busy notice was sent)
};
inline constexpr std::size_t kRefusalKinds = 8;

class RefusalLog {
 public:
  using Clock = std::chrono::steady_clock;

  explicit RefusalLog(std::chrono::milliseconds window = std::chrono::seconds(5)) : window_(window) {}

  // Counts one refusal of `peer` by the server `server`; logs it at warn unless a line of the
  // same kind was logged less than a window ago.
  void refused(spdlog::logger& log, const std::string& server, const std::string& peer,
               RefusalKind kind, const std::string& reason) {
    refused(log, server, peer, kind, reason, Clock::now());
  }
  // As above, at time `now` (tests).
  void refused(spdlog::logger& log, const std::string& server, const std::string& peer,
               RefusalKind kind, const std::string& reason, Clock::time_point now);

  // Logs, for each kind, the refusals the last line left out (when the server stops), so that the
  // log accounts for every refusal.
  void flush(spdlog::logger& log, const std::string& server);

  // Refusals counted so far.
  uint64_t total() const { return total_; }

 private:
  struct Window {
    Clock::time_point lastLine{};
    bool logged = false;
    uint64_t suppressed = 0;
  };
  std::chrono::milliseconds window_;
  std::array<Window, kRefusalKinds> windows_{};
  uint64_t total_ = 0;
};

}  // namespace ddp::detail
