// ddprun: parses the torchrun-compatible command line into a LaunchConfig and runs the agent.
// Exit codes: see launcher/agent/agent.hpp (0, the root cause's code, 128+signal, 1, 4, 127) and 2 for a
// usage error.
#include <fcntl.h>
#include <unistd.h>

#include <iostream>

#include "launcher/agent/agent.hpp"
#include "launcher/cli/cli.hpp"
#include "launcher/rendezvous/store_access.hpp"
#include "launcher/workers/worker_process.hpp"
#include "rendezvous/base/logging.hpp"

namespace {

// Workers inherit fds 0-2 and the spawner relies on them being taken; a closed one becomes
// /dev/null.
void ensureStandardFds() {
  for (int fd = 0; fd <= 2; ++fd) {
    if (::fcntl(fd, F_GETFD) != -1) continue;
    const int opened = ::open("/dev/null", fd == 0 ? O_RDONLY : O_WRONLY);
    if (opened >= 0 && opened != fd) {
      ::dup2(opened, fd);
      ::close(opened);
    }
  }
}

}  // namespace

int main(int argc, char** argv) {
  ensureStandardFds();
  ddp::CliOutcome cli = ddp::parseCommandLineOrReport(argc, argv);
  if (!cli.config) return cli.exitCode;
  try {
    ddp::setupLogging(cli.config->logLevel);
    ddp::raiseAgentDescriptorLimit(*cli.config);  // workers get the limit back (guardian.cpp)
    return ddp::run(*cli.config);
  } catch (const ddp::SpawnError& e) {
    std::cerr << "ddprun: error: " << e.what() << std::endl;
    return 127;
  } catch (const ddp::ConfigError& e) {
    std::cerr << "ddprun: error: " << e.what() << std::endl;
    return ddp::kUsageExitCode;
  } catch (const std::exception& e) {
    std::cerr << "ddprun: error: " << e.what() << std::endl;
    return 1;
  }
}
