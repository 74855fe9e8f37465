#include "rendezvous/base/backoff.hpp"

#include <algorithm>
#include <thread>

namespace ddp {

Backoff::Backoff(BackoffOptions options)
    : options_(options),
      current_(static_cast<double>(options.initial.count())),
      rng_(std::random_device{}()) {}

std::chrono::milliseconds Backoff::nextDelay() {
  const double base = std::min(current_, static_cast<double>(options_.max.count()));
  current_ = std::min(current_ * std::max(1.0, options_.multiplier),
                      static_cast<double>(options_.max.count()));
  double factor = 1.0;
  if (options_.jitter > 0) {
    std::uniform_real_distribution<double> spread(1.0 - options_.jitter, 1.0 + options_.jitter);
    factor = spread(rng_);
  }
  return std::chrono::milliseconds(static_cast<int64_t>(std::max(0.0, base * factor)));
}

bool Backoff::sleepBefore(std::chrono::steady_clock::time_point deadline) {
  const auto now = std::chrono::steady_clock::now();
  if (now >= deadline) return false;
  const auto wake = std::min<std::chrono::steady_clock::time_point>(now + nextDelay(), deadline);
  std::this_thread::sleep_until(wake);
  return true;
}

void Backoff::reset() { current_ = static_cast<double>(options_.initial.count()); }

}  // namespace ddp
