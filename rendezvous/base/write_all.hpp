// writeAll: the one way ddprun writes text to a descriptor it does not own the other end of (the
// console, a worker's log file, the failure summary's table on stderr).
//
// Thread safety: a free function; concurrent calls on one descriptor may interleave.
#pragma once

#include <string>

namespace ddp {

// Writes all of `data` to `fd` (retrying partial writes and EINTR); errors are ignored (a closed
// console must not stop the agent). Blocks while `fd` does.
void writeAll(int fd, const std::string& data);

}  // namespace ddp
