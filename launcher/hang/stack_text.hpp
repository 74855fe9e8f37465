// Stack text: what hang detection makes of the stacks it collected from a hung worker — gdb's
// `thread apply all bt` of a native worker, or the faulthandler dump a Python worker writes to its
// stderr when it gets SIGABRT (stack_collector.hpp).
//
// Thread safety: pure functions.
#pragma once

#include <cstddef>
#include <string>

namespace ddp {

// gdb's output without its chatter: only the "Thread N (...)" headers and the "#K ..." frames.
// Returns the input unchanged when it holds neither (an error message from gdb, say).
std::string cleanGdbStacks(const std::string& gdbOutput);

// A Python faulthandler dump without the lines that are not stacks: "Fatal Python error: Aborted"
// (the SIGABRT that asked for the dump) and the "Extension modules: ..." list. Leading blank lines
// go too.
std::string cleanPythonDump(const std::string& dump);

// At most `maxLines` lines of `stacks` for the failure summary and the log; when cut, a last line
// says how many were left out and where the whole text is (`fullPath`).
std::string trimStacks(const std::string& stacks, std::size_t maxLines, const std::string& fullPath);

// True when a thread of `stacks` is waiting inside a collective or on the worker store — the
// victim of a peer that does not come, rather than the cause: worker_runtime's communicators,
// Gloo's collectives and buffer waits, NCCL calls, torch's c10d (C++ frames) and
// torch.distributed's Python frames. Gloo's idle background loop does not count.
bool waitsForPeer(const std::string& stacks);

}  // namespace ddp
