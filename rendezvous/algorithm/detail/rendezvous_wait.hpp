// Waiting for the first of several rendezvous keys, in short slices.
//
// Store::wait() waits for *all* keys and holds a TCP connection for its whole duration, which
// would stall the heartbeat thread sharing that connection. waitForAny() waits on the first key
// in slices of at most `slice` and checks the others between slices, so a shared connection is
// never held longer than one slice.
//
// Thread safety: as the Store given.
#pragma once

#include <chrono>
#include <optional>
#include <string>
#include <vector>

#include "rendezvous/store/store.hpp"

namespace ddp::detail {

using Clock = std::chrono::steady_clock;

// Returns the index of the first key of `keys` found to exist, or nullopt once `deadline` passed.
// keys[0] is waited on (the expected outcome); the others are checked after each slice.
// Blocks up to the deadline. Throws what the store throws (NetworkError, ...), except the
// TimeoutError of a slice.
std::optional<size_t> waitForAny(Store& store, const std::vector<std::string>& keys,
                                 Clock::time_point deadline, std::chrono::milliseconds slice);

// Milliseconds left until `deadline` (0 when passed).
std::chrono::milliseconds remaining(Clock::time_point deadline);

}  // namespace ddp::detail
