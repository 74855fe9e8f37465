// ddprun's command line: torchrun-compatible flags (CLI11), PET_* environment overrides, Slurm
// detection and defaults, resolved into one LaunchConfig.
//
// Precedence, per option: command line > PET_<DEST> variable > Slurm detection > default.
// Every torchrun flag is accepted in its dashed and underscored spelling (--nproc-per-node,
// --nproc_per_node), as --flag=value or --flag value. The first positional argument is the entry
// point (a *.py script, a -m module, or a program); everything after it goes to the workers
// untouched, even arguments that look like ddprun flags.
//
// Thread safety: the functions are reentrant; they read the environment only through the lookup
// they are given.
#pragma once

#include <functional>
#include <optional>
#include <string>
#include <vector>

#include "launcher/config/launch_config.hpp"
#include "launcher/numa/nproc.hpp"
#include "rendezvous/base/error.hpp"

namespace ddp {

// Exit status for a usage error (unknown flag, bad value): like argparse and torchrun.
constexpr int kUsageExitCode = 2;

// A bad command line or PET_* value. what() is one line without the "ddprun: error: " prefix,
// naming the flag or variable, the value and what was expected. Fix the input and run again.
class UsageError : public ConfigError {
 public:
  using ConfigError::ConfigError;
};

// --help, --version or --dry-run (the resolved configuration as JSON): not an error. text() goes to stdout and the process exits 0.
class InfoRequested : public Error {
 public:
  explicit InfoRequested(std::string text) : Error("information requested"), text_(std::move(text)) {}
  const std::string& text() const { return text_; }

 private:
  std::string text_;
};

// Parses the arguments after the program name (argv[1..]). Reads PYTHON_EXEC, PET_*,
// TORCH_ELASTIC_SHUTDOWN_TIMEOUT, DDP_LOG_LEVEL, CUDA_VISIBLE_DEVICES and SLURM_* through
// `getenv` only. Does not block, except for GPU counting with --nproc-per-node=gpu|auto (see
// nproc.hpp) and, for --dry-run with --numa-binding, reading the topology (numa_setup.hpp, which
// also reads HWLOC_XMLFILE / HWLOC_SYNTHETIC). Throws UsageError or ConfigError (exit 2) or
// InfoRequested (exit 0).
LaunchConfig parseCommandLine(const std::vector<std::string>& args, const EnvLookup& getenv);

// The same over main()'s argc/argv and the process environment.
LaunchConfig parseCommandLine(int argc, char** argv);

// Fills what the user did not set from the environment the agent runs in, unless --no-slurm:
// inside a Slurm step (SLURM_JOB_ID and SLURM_NODEID set) the node count, node rank, rendezvous
// endpoint, run id and the c10d backend come from SLURM_* (see slurm_env.hpp when present).
// Kubernetes (Kubeflow PyTorchJob / Trainer) needs nothing here: it speaks through PET_*, which
// parseCommandLine already applied. Appends one line to config.notes saying what was detected.
// Called by parseCommandLine; exposed for tests. Throws UsageError on malformed SLURM_* values.
void applyEnvironmentDetection(LaunchConfig& config, const EnvLookup& getenv);

// What main() does with a command line: the config, or the exit code after --help/--version
// (text printed to stdout, 0) or a usage error ("ddprun: error: ..." on stderr, 2).
struct CliOutcome {
  std::optional<LaunchConfig> config;
  int exitCode = 0;
};
CliOutcome parseCommandLineOrReport(int argc, char** argv);

// The --help text.
std::string helpText();

// --nproc-per-node resolution: a positive integer as given; "cpu" = countCpus(); "gpu" =
// countGpus(), ConfigError when there is none; "auto" = countGpus() if > 0, else countCpus().
// Throws ConfigError for anything else.
int resolveNprocPerNode(const std::string& spec, const EnvLookup& getenv = processEnv);

}  // namespace ddp
