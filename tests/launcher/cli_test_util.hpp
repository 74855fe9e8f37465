// Helpers shared by the command-line tests: parse an argument list against a map environment.
#pragma once

#include <catch2/catch.hpp>

#include <map>
#include <string>
#include <vector>

#include "launcher/cli/cli.hpp"

namespace cli_test {

using Env = std::map<std::string, std::string>;

inline ddp::EnvLookup lookup(const Env& env) {
  return [env](const std::string& name) -> std::optional<std::string> {
    auto it = env.find(name);
    return it == env.end() ? std::nullopt : std::optional<std::string>(it->second);
  };
}

inline ddp::LaunchConfig parse(std::vector<std::string> args, const Env& env = {}) {
  return ddp::parseCommandLine(args, lookup(env));
}

// The UsageError message for a command line that must be rejected ("" and a failure otherwise).
inline std::string errorOf(std::vector<std::string> args, const Env& env = {}) {
  try {
    parse(std::move(args), env);
  } catch (const ddp::UsageError& e) {
    return e.what();
  }
  FAIL("the command line was accepted");
  return "";
}

// What --dry-run prints for a command line.
inline std::string dryRun(std::vector<std::string> args, const Env& env = {}) {
  args.insert(args.begin(), "--dry-run");
  try {
    parse(std::move(args), env);
  } catch (const ddp::InfoRequested& info) {
    return info.text();
  }
  FAIL("--dry-run printed nothing");
  return "";
}

// The variables srun sets for one task of `srun -N4 --ntasks-per-node=1` in job 42.
inline Env slurmStep(int nodeId) {
  return {{"SLURM_JOB_ID", "42"},        {"SLURM_STEP_ID", "0"},
          {"SLURM_STEP_NODELIST", "n[1-4]"}, {"SLURM_STEP_NUM_NODES", "4"},
          {"SLURM_NODEID", std::to_string(nodeId)}, {"SLURM_LOCALID", "0"}};
}

}  // namespace cli_test
