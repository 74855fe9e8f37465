// Turning the positional entry point into the worker command line (torchrun's config_from_args).
//
// *.py or --run-path: $PYTHON_EXEC -u script args...   (PYTHON_EXEC default python3)
// -m:                 $PYTHON_EXEC -u -m module args...
// --no-python:        program args...                  (PATH lookup by the spawner)
// anything else:      program args...                  (ddprun runs non-.py programs directly,
//                                                        where torchrun would run python on them)
// Arguments are copied untouched; "${local_rank}" stays for the launcher to substitute per worker.
// Thread safety: pure function.
#pragma once

#include <string>
#include <vector>

#include "launcher/config/launch_config.hpp"

namespace ddp::detail {

struct EntrypointRequest {
  std::vector<std::string> positional;  // script/module/program, then its arguments
  bool module = false;
  bool noPython = false;
  bool runPath = false;
  std::string pythonExec = "python3";
};

// Fills config.command, config.entrypointName and config.entrypointKind. Throws UsageError when
// there is no entry point, or for -m together with --no-python (without --run-path, which wins
// over both, as in torchrun).
void resolveEntrypoint(const EntrypointRequest& request, LaunchConfig& config);

}  // namespace ddp::detail
