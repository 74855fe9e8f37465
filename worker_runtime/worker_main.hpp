// runWorkerMain: the outermost frame of a C++ worker's main(). It turns any exception escaping the
// worker into one log line, an error file for the agent (TORCHELASTIC_ERROR_FILE, when set) and a
// documented exit code:
//
//   0  the worker's own return value on success (whatever fn returns is passed through)
//   1  kExitFailure      any other error
//   2  kExitConfigError  bad flags, config file, data or worker environment (ConfigError)
//   3  kExitCommError    a collective failed or timed out, usually because a peer died (CommError);
//                        restarting the group is the remedy
//   4  kExitStoreError   the worker store was unreachable, timed out or spoke garbage
//                        (NetworkError, TimeoutError, ProtocolError)
//
// Thread safety: call once, from main().
#pragma once

#include <exception>
#include <functional>

namespace ddp {

constexpr int kExitFailure = 1;
constexpr int kExitConfigError = 2;
constexpr int kExitCommError = 3;
constexpr int kExitStoreError = 4;

// The exit code for the exception held by `error` (see the table above). Never throws.
int exitCodeFor(std::exception_ptr error);

// Runs fn(argc, argv) and returns its result; on an exception, takes the failure's sequence number
// (failure_sequence.hpp; up to 2 s when the worker store does not answer), logs it on the `worker`
// logger, writes $TORCHELASTIC_ERROR_FILE with the number (a failure to write is logged, not
// thrown) and returns the exit code above. Never throws.
int runWorkerMain(int argc, char** argv, const std::function<int(int, char**)>& fn);

}  // namespace ddp
