// The descriptor limit (RLIMIT_NOFILE) of a process that serves many connections.
//
// A store holds one descriptor per connection, and most distributions start every process with a
// soft limit of 1024 however high the hard limit is (systemd's default: 1024 soft, 524288 hard).
// raiseFdLimit() lifts the soft limit to the hard one once, at start (what ddprund and every
// ddprun agent do); restoreInheritedFdLimit() puts the soft limit a process started with back,
// for the programs it runs (a worker gets the limit torchrun would have given it: programs that
// use select() break past 1024).
//
//   auto limit = raiseFdLimit();  // {soft 1024 -> 524288, hard 524288}
//   connectionRoom(limit.soft);   // 524032: what connections may use, the rest is reserved
//
// Thread safety: raiseFdLimit() once, before threads start; restoreInheritedFdLimit() is
// async-signal-safe (for a child between fork and exec); spareDescriptorMutex() is for any thread;
// the rest are pure.
#pragma once

#include <cstddef>
#include <cstdint>
#include <mutex>
#include <string>

namespace ddp {

struct FdLimit {
  uint64_t before = 0;  // the soft limit the process started with
  uint64_t soft = 0;    // the soft limit now
  uint64_t hard = 0;    // the hard limit (RLIM_INFINITY is reported as UINT64_MAX)
  std::string error;    // why the raise failed, when it did ("" otherwise)

  bool raised() const { return soft > before; }
  // "524288 (raised from 1024; hard limit 524288)", "64 (the hard limit)".
  std::string describe() const;
};

// Raises the soft RLIMIT_NOFILE to the hard limit (capped at /proc/sys/fs/nr_open when the hard
// limit is infinite) and remembers the soft limit it started with. Never throws; a failed raise
// leaves the limit as it was and says why in `error`. Idempotent (a second call reports the
// first call's `before`).
FdLimit raiseFdLimit();

// The current RLIMIT_NOFILE (before = soft when raiseFdLimit() was never called). Never throws.
FdLimit currentFdLimit();

// Sets the soft limit back to what the process started with, when raiseFdLimit() raised it.
// Async-signal-safe; for a forked child before exec. Never fails (a failure is ignored).
void restoreInheritedFdLimit() noexcept;

// Descriptors a server keeps out of its connection count for its own files: the listener, the
// event loop, logs, the status pages, the data directory, the spare it keeps for refusals.
// clamp(limit / 16, 16, 256).
std::size_t fdReserve(uint64_t limit);

// The connections a server can hold under a soft limit of `limit` descriptors:
// limit - fdReserve(limit) (at least 1).
std::size_t connectionRoom(uint64_t limit);

// Held by a server from the moment it gives up its spare descriptor (to accept a client it has to
// refuse when the process is out of descriptors) until it has taken the spare again; and by every
// other acceptor of the process around its accept(), so that no other thread takes the descriptor
// meant for that client (ddprund: the store and its status pages).
std::mutex& spareDescriptorMutex();

// Descriptors open in this process now (entries of /proc/self/fd), 0 when unknown.
std::size_t openFdCount();

}  // namespace ddp
