// runBounded: runs a short helper command (a version probe) with a time bound and returns what it
// printed.
//
// The child gets /dev/null as stdin and stderr, a pipe as stdout, and dies with the thread that
// started it (PR_SET_PDEATHSIG), so an agent that is killed leaves no probe behind. At the bound it
// is SIGKILLed; it is always reaped, by its pid.
//
// Thread safety: may be called from any thread. Blocks up to `timeout` (plus the reaping of a
// SIGKILLed child).
#pragma once

#include <chrono>
#include <optional>
#include <string>
#include <vector>

namespace ddp {

// Runs argv (argv[0] looked up on PATH) and returns its stdout (at most `maxBytes`) when it exited
// 0 within `timeout`; nullopt when it could not start, failed, or ran out of time. Never throws.
std::optional<std::string> runBounded(const std::vector<std::string>& argv,
                                      std::chrono::milliseconds timeout, size_t maxBytes = 4096);

}  // namespace ddp
