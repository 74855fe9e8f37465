// FileTimerRequest: one line of torch's file-based watchdog protocol
// (torch.distributed.elastic.timer.FileTimerClient, torch 1.13 and 2.x), the codec ddprun's timer
// FIFO speaks (file_timer_server.hpp).
//
// A client opens the FIFO with O_WRONLY | O_NONBLOCK, writes one JSON object and a '\n' in a single
// write of at most PIPE_BUF (4096) bytes, so lines of concurrent clients never interleave, and
// closes it:
//   {"version": 1, "pid": 4242, "scope_id": "train.py#57", "expiration_time": 1700000012.5,
//    "signal": 9}
//   version          1 (the only version torch writes)
//   pid              the process that set the timer (os.getpid(): a worker or one of its children)
//   scope_id         the timer's name, unique per pid (torch: "<file>#<line>" of the `expires` call)
//   expiration_time  acquire: the deadline in Unix seconds (time.time() + after);
//                    negative: release the (pid, scope_id) timer
//   signal           what ends the process when the timer expires (SIGKILL by default); <= 0
//                    means "do not reap" (torch only logs)
// Other members are ignored, as torch's server ignores them.
//
// ddprun's own progress beat (worker_runtime/progress.hpp) is a release of the reserved scope
// "ddprun.progress" with an extra "step" member and, for straggler detection, "compute_s" (the
// worker's mean compute seconds per step since its previous beat, >= 0; launcher/straggler/): torch's own FileTimerServer treats it as the
// release of a timer it never had (a no-op), so a worker_runtime worker also runs under torchrun's
// watchdog.
//
// Thread safety: pure functions.
#pragma once

#include <sys/types.h>

#include <cstdint>
#include <optional>
#include <string>
#include <variant>

namespace ddp {

// The scope of worker_runtime's progress beats.
inline constexpr const char* kProgressScope = "ddprun.progress";
// Longest line a client may write in one atomic write (Linux PIPE_BUF), newline included.
inline constexpr std::size_t kMaxTimerLine = 4096;

struct FileTimerRequest {
  pid_t pid = 0;
  std::string scopeId;
  double expirationTime = -1;  // Unix seconds; < 0 = release
  int signal = 0;
  std::optional<int64_t> step;  // progress beats only
  std::optional<double> computeSeconds;  // progress beats only: "compute_s"

  bool isRelease() const { return expirationTime < 0; }
  bool isProgress() const { return scopeId == kProgressScope; }
};

// Why a line was rejected, for a log line.
struct MalformedTimerLine {
  std::string why;
};

// Parses one line (without its '\n'). Never throws.
std::variant<FileTimerRequest, MalformedTimerLine> parseTimerLine(const std::string& line);

// The line (with '\n') a client writes for `request`, as torch's FileTimerRequest.to_json() plus
// "step" when set. Pure.
std::string formatTimerLine(const FileTimerRequest& request);

}  // namespace ddp
