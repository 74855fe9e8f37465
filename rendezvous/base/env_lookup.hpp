// EnvLookup: how configuration code reads environment variables, so that tests hand it a map and
// production code hands it processEnv. One type for the command line, Slurm detection, GPU
// counting, NUMA and preflight.
//
// Thread safety: processEnv reads the process environment (std::getenv); it is safe while no
// thread changes the environment.
#pragma once

#include <functional>
#include <optional>
#include <string>

namespace ddp {

// Returns the value of an environment variable, or nullopt when unset (an empty value is "").
using EnvLookup = std::function<std::optional<std::string>(const std::string& name)>;

// The environment of this process (std::getenv). Never throws.
std::optional<std::string> processEnv(const std::string& name);

}  // namespace ddp
