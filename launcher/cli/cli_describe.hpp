// The resolved LaunchConfig as JSON, for `ddprun --dry-run`: what the flags, PET_* variables and
// Slurm detection added up to, without starting anything.
// Thread safety: pure function.
#pragma once

#include <string>

#include "launcher/config/launch_config.hpp"
#include "launcher/numa/numa_setup.hpp"

namespace ddp::detail {

// One JSON object (pretty-printed, newline-terminated) with a key per LaunchConfig field, named
// after torchrun's dests (nproc_per_node, rdzv_endpoint, ...). Durations in milliseconds, signals
// by name, unset optionals as null. `numa` (when given, the --numa-binding resolved on this
// machine) adds "numa_plan": the topology, the outcome and each local rank's CPUs and memory
// nodes; null without it.
std::string describeConfig(const LaunchConfig& config, const NumaSetup* numa = nullptr);

}  // namespace ddp::detail
