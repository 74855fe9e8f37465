#include "launcher/cli/cli_entrypoint.hpp"

#include "launcher/cli/cli.hpp"

namespace ddp::detail {

void resolveEntrypoint(const EntrypointRequest& request, LaunchConfig& config) {
  if (request.positional.empty() || request.positional.front().empty())
    throw UsageError("the training script, module or program is missing (see --help)");
  const std::string& entry = request.positional.front();
  std::vector<std::string> args(request.positional.begin() + 1, request.positional.end());
  config.entrypointName = entry;
  std::vector<std::string> command;
  bool python = request.runPath || request.module || entry.ends_with(".py");
  if (!request.runPath && request.module && request.noPython)
    throw UsageError("-m/--module and --no-python cannot be used together");
  if (!request.runPath && request.noPython) python = false;
  if (python) {
    command = {request.pythonExec, "-u"};
    if (request.module && !request.runPath) command.push_back("-m");
    config.entrypointKind = command.back() == "-m" ? EntrypointKind::kPythonModule
                                                    : EntrypointKind::kPythonScript;
  } else {
    config.entrypointKind = EntrypointKind::kProgram;
  }
  command.push_back(entry);
  command.insert(command.end(), args.begin(), args.end());
  config.command = std::move(command);
}

}  // namespace ddp::detail
