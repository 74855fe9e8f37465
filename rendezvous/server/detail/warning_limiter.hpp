// WarningLimiter: rate limit for the warnings clients can provoke (bad input, refused connections,
// an exhausted memory budget), so that a flood of bad connections cannot flood the log.
//
// At most `burst` warnings pass per `window`; the rest are counted. The first warning that passes
// after some were suppressed carries the count ("3,141 similar warnings suppressed"), and
// takeSuppressed() hands over what is left (the server logs it when it stops). Time is passed in
// (steady clock) so that tests drive it; the clock only spaces warnings out, it orders nothing.
//
// Thread safety: none; the server's io_context thread owns it.
#pragma once

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>

namespace ddp::detail {

class WarningLimiter {
 public:
  using Clock = std::chrono::steady_clock;

  explicit WarningLimiter(std::size_t burst = 10,
                          Clock::duration window = std::chrono::seconds(10))
      : burst_(burst), window_(window) {}

  // Whether a warning may be logged at `now`. When it may, the returned text is a suffix for it:
  // empty, or " (N similar warnings suppressed)". nullopt: suppressed (and counted).
  std::optional<std::string> admit(Clock::time_point now);

  // Warnings suppressed and not yet reported; resets the count.
  uint64_t takeSuppressed();
  // Every warning suppressed so far (for ServerStats).
  uint64_t suppressedTotal() const { return suppressedTotal_; }

 private:
  std::size_t burst_;
  Clock::duration window_;
  Clock::time_point windowStart_{};
  bool started_ = false;
  std::size_t inWindow_ = 0;
  uint64_t suppressed_ = 0;
  uint64_t suppressedTotal_ = 0;
};

}  // namespace ddp::detail
