#include "rendezvous/algorithm/detail/rendezvous_wait.hpp"

#include <algorithm>

#include "rendezvous/base/error.hpp"

namespace ddp::detail {

std::chrono::milliseconds remaining(Clock::time_point deadline) {
  const auto left = std::chrono::ceil<std::chrono::milliseconds>(deadline - Clock::now());
  return std::max(left, std::chrono::milliseconds(0));
}

std::optional<size_t> waitForAny(Store& store, const std::vector<std::string>& keys,
                                 Clock::time_point deadline, std::chrono::milliseconds slice) {
  while (true) {
    const auto left = remaining(deadline);
    const auto budget = std::clamp(left, std::chrono::milliseconds(1), slice);
    try {
      store.wait({keys[0]}, budget);
      return 0;
    } catch (const TimeoutError&) {
      // One slice passed; look at the other keys, then wait again until the deadline.
    }
    for (size_t i = 1; i < keys.size(); ++i) {
      if (store.check({keys[i]})) return i;
    }
    if (Clock::now() >= deadline) return std::nullopt;
  }
}

}  // namespace ddp::detail
