// How durations read in messages and logs, in two forms:
//   durationText  a budget or a timeout, as the user set it: "30 s", "1.5 s", "250 ms"
//   secondsText   a measured time (elapsed, silent, a clock offset), always one decimal: "3.0 s"
//
// Thread safety: pure functions.
#pragma once

#include <chrono>
#include <string>

namespace ddp {

// "250 ms" under a second, "30 s" for whole seconds, else "1.5 s" (one decimal). Never throws.
std::string durationText(std::chrono::milliseconds d);

// "%.1f s" of `d` ("3.0 s", "0.4 s", "-1.5 s"). Never throws.
std::string secondsText(std::chrono::duration<double> d);

}  // namespace ddp
