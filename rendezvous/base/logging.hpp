// Logging for ddprun's binaries and libraries (spdlog).
//
// Libraries ask for a named logger (`rdzv`, `agent`, `worker`, `store`, `trainer`) with
// ddp::logger(); only binaries call setupLogging(), which installs one stderr sink with time,
// level, component, host and pid for every logger. Without setupLogging() loggers still work
// (stderr, info level).
//
// Thread safety: both functions are thread-safe.
#pragma once

#include <memory>
#include <string>

#include <spdlog/spdlog.h>

namespace ddp {

// Returns the logger called `name`, creating it with the current sink and level if needed.
std::shared_ptr<spdlog::logger> logger(const std::string& name);

// Configures every logger: level from `level` if non-empty, else from $DDP_LOG_LEVEL, else info.
// `tag` is added to each line after the pid (e.g. "rank 3"); may be empty.
// Throws ConfigError for an unknown level name.
void setupLogging(const std::string& level, const std::string& tag = "");

}  // namespace ddp
