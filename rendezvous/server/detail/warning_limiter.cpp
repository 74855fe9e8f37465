#include "rendezvous/server/detail/warning_limiter.hpp"

namespace ddp::detail {

std::optional<std::string> WarningLimiter::admit(Clock::time_point now) {
  if (!started_ || now - windowStart_ >= window_) {
    started_ = true;
    windowStart_ = now;
    inWindow_ = 0;
  }
  if (inWindow_ >= burst_) {
    ++suppressed_;
    ++suppressedTotal_;
    return std::nullopt;
  }
  ++inWindow_;
  const uint64_t earlier = takeSuppressed();
  if (earlier == 0) return std::string();
  return " (" + std::to_string(earlier) + " similar warning" + (earlier == 1 ? "" : "s") +
         " suppressed)";
}

uint64_t WarningLimiter::takeSuppressed() {
  const uint64_t n = suppressed_;
  suppressed_ = 0;
  return n;
}

}  // namespace ddp::detail
