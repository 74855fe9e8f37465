#include "rendezvous/base/duration_text.hpp"

#include <cstdint>
#include <cstdio>

namespace ddp {

std::string durationText(std::chrono::milliseconds d) {
  const int64_t ms = d.count();
  if (ms < 1000) return std::to_string(ms) + " ms";
  if (ms % 1000 == 0) return std::to_string(ms / 1000) + " s";
  return secondsText(d);
}

std::string secondsText(std::chrono::duration<double> d) {
  char text[32];
  std::snprintf(text, sizeof(text), "%.1f s", d.count());
  return text;
}

}  // namespace ddp
