// The resolved LaunchConfig as JSON, for `ddprun --dry-run`: what the flags, PET_* variables and
// Slurm detection added up to, without starting anything.
// Thread safety: pure function.
#pragma once

#include <string>

#include "launcher/launch_config.hpp"

namespace ddp::detail {

// One JSON object (pretty-printed, newline-terminated) with a key per LaunchConfig field, named
// after torchrun's dests (nproc_per_node, rdzv_endpoint, ...). Durations in milliseconds, signals
// by name, unset optionals as null.
std::string describeConfig(const LaunchConfig& config);

}  // namespace ddp::detail
