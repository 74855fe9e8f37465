// Backoff: delays between retries of a deadline-bounded operation (exponential growth + jitter).
//
// Used by TcpStoreClient's connect loop and by anything else that retries until a deadline. The
// delay starts at `initial`, grows by `multiplier` per attempt up to `max`, and each delay is
// spread by +/- `jitter` (a fraction) so many clients restarting together do not retry in lockstep.
// sleepBefore() never sleeps past the caller's deadline.
//
// Thread safety: a Backoff is used by one thread at a time (it holds the retry state and a PRNG).
#pragma once

#include <chrono>
#include <random>

namespace ddp {

struct BackoffOptions {
  // First delay.
  std::chrono::milliseconds initial{10};
  // Largest delay before jitter.
  std::chrono::milliseconds max{1000};
  // Growth factor per attempt (>= 1).
  double multiplier = 2.0;
  // Each delay is multiplied by a uniform factor in [1 - jitter, 1 + jitter]; 0 disables jitter.
  double jitter = 0.25;
};

class Backoff {
 public:
  explicit Backoff(BackoffOptions options = {});

  // The next delay (advances the exponential state). Never negative. Does not block.
  std::chrono::milliseconds nextDelay();

  // Sleeps for nextDelay(), cut short at `deadline`. Returns false (without sleeping) when the
  // deadline has already passed, true otherwise. Blocks at most until `deadline`; never throws.
  bool sleepBefore(std::chrono::steady_clock::time_point deadline);

  // Back to the initial delay (after a success).
  void reset();

 private:
  BackoffOptions options_;
  double current_;  // the un-jittered next delay, in ms
  std::mt19937_64 rng_;
};

}  // namespace ddp
