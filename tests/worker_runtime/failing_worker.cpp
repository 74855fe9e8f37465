// A minimal C++ worker for error_file_torch_test.py: `failing_worker <kind>` runs under
// runWorkerMain and fails the way <kind> says (comm, config, other, ok).
#include <stdexcept>
#include <string>

#include "rendezvous/base/error.hpp"
#include "rendezvous/base/logging.hpp"
#include "worker_runtime/worker_main.hpp"

int main(int argc, char** argv) {
  ddp::setupLogging("");
  return ddp::runWorkerMain(argc, argv, [](int n, char** args) -> int {
    const std::string kind = n > 1 ? args[1] : "ok";
    if (kind == "comm") {
      throw ddp::CommError("gloo allreduce of 1000 float32 elements failed on rank 1 of 2");
    }
    if (kind == "config") throw ddp::ConfigError("RANK='x' is not an integer");
    if (kind == "other") throw std::logic_error("invariant broken");
    return 0;
  });
}
