// Error file: how a worker tells its agent why it failed, in torchelastic's error.json format
// (docs/worker_runtime.md), so ddprun's and torchrun's failure summaries show the root cause:
//
//   {"message": {"message": "<Type>: <text>",
//                "extraInfo": {"py_callstack": "<traceback>", "timestamp": "<unix seconds>",
//                              "failure_seq": "<n>", "step": "<n>"}}}
//
// failure_seq (ours; torch ignores extra extraInfo fields) is the worker's place in the job-wide
// order of failures (failure_sequence.hpp); absent when none was taken. step (ours too) is the
// last step the worker reported (progress.hpp); absent when it reported none.
//
// Thread safety: writeErrorFile may be called from any thread; concurrent writers to one path
// leave one complete file (each writes a private temporary and renames it into place).
#pragma once

#include <cstdint>
#include <ctime>
#include <exception>
#include <optional>
#include <string>

namespace ddp {

// Writes the error file at `path` atomically (temporary file + rename; the parent folder is
// created if missing). `message` is "<Type>: <text>"; `timestamp` defaults to now;
// `failureSeq` is written as extraInfo.failure_seq and `step` as extraInfo.step when given.
// Throws ddp::Error naming the path when it cannot be written.
void writeErrorFile(const std::string& path, const std::string& message,
                    const std::string& traceback, std::time_t timestamp = std::time(nullptr),
                    std::optional<int64_t> failureSeq = std::nullopt,
                    std::optional<int64_t> step = std::nullopt);

// "<Type>: <what()>" for an exception (demangled type name, e.g. "ddp::CommError: ...").
std::string describeException(const std::exception& e);

// The exception and every exception nested in it (std::throw_with_nested), one per line, outermost
// first; "unknown exception" for non-std exceptions. Must be called with a live exception_ptr.
std::string exceptionChain(std::exception_ptr error);

}  // namespace ddp
