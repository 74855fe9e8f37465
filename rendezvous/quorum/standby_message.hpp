// The message a ddprun agent writes on a standby process's FIFO to make it a failed worker's
// replacement (worker_runtime/standby.hpp): an 8-byte little-endian length, then that many bytes of
// "NAME=VALUE\0" entries, the process's whole new environment (at most kMaxStandbyMessage bytes).
//
// Thread safety: pure functions.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <utility>
#include <vector>

namespace ddp {

// The variable that makes a process a standby; its value is the FIFO's path.
constexpr const char* kStandbyEnv = "DDP_STANDBY";
constexpr std::size_t kStandbyHeaderBytes = 8;
constexpr std::size_t kMaxStandbyMessage = std::size_t(16) << 20;

using EnvEntries = std::vector<std::pair<std::string, std::string>>;

// Header and payload of the message for `env`.
std::string encodeStandbyMessage(const EnvEntries& env);
// The payload length a header announces (not checked against kMaxStandbyMessage).
uint64_t standbyMessageLength(const unsigned char (&header)[kStandbyHeaderBytes]);
// The entries of a payload. Throws ConfigError naming what is malformed (an entry without '=' or
// a name, a last entry without its terminating NUL).
EnvEntries decodeStandbyMessage(const std::string& payload);

}  // namespace ddp
