// Error file: how a worker tells its agent why it failed, in torchelastic's error.json format
// (reference/torchrun.md §4.6), so ddprun's and torchrun's failure summaries show the root cause:
//
//   {"message": {"message": "<Type>: <text>",
//                "extraInfo": {"py_callstack": "<traceback>", "timestamp": "<unix seconds>"}}}
//
// Thread safety: writeErrorFile may be called from any thread; concurrent writers to one path
// leave one complete file (each writes a private temporary and renames it into place).
#pragma once

#include <ctime>
#include <exception>
#include <string>

namespace ddp {

// Writes the error file at `path` atomically (temporary file + rename; the parent folder is
// created if missing). `message` is "<Type>: <text>"; `timestamp` defaults to now.
// Throws ddp::Error naming the path when it cannot be written.
void writeErrorFile(const std::string& path, const std::string& message,
                    const std::string& traceback, std::time_t timestamp = std::time(nullptr));

// "<Type>: <what()>" for an exception (demangled type name, e.g. "ddp::CommError: ...").
std::string describeException(const std::exception& e);

// The exception and every exception nested in it (std::throw_with_nested), one per line, outermost
// first; "unknown exception" for non-std exceptions. Must be called with a live exception_ptr.
std::string exceptionChain(std::exception_ptr error);

}  // namespace ddp
