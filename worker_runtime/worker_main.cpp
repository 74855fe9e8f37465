#include "worker_runtime/worker_main.hpp"

#include <cstdlib>
#include <exception>
#include <string>

#include "rendezvous/base/error.hpp"
#include "rendezvous/base/logging.hpp"
#include "worker_runtime/error_file.hpp"
#include "worker_runtime/failure_sequence.hpp"
#include "worker_runtime/progress.hpp"

namespace ddp {

int exitCodeFor(std::exception_ptr error) {
  try {
    std::rethrow_exception(error);
  } catch (const CommError&) {
    return kExitCommError;
  } catch (const ConfigError&) {
    return kExitConfigError;
  } catch (const NetworkError&) {
    return kExitStoreError;
  } catch (const TimeoutError&) {
    return kExitStoreError;
  } catch (const ProtocolError&) {
    return kExitStoreError;
  } catch (...) {
    return kExitFailure;
  }
}

namespace {

std::string headline(std::exception_ptr error) {
  try {
    std::rethrow_exception(error);
  } catch (const std::exception& e) {
    return describeException(e);
  } catch (...) {
    return "unknown exception: a non-std exception escaped the worker";
  }
}

int reportFailure(std::exception_ptr error) {
  // First the failure's place in the job's order (a no-op when a communicator already took it
  // while the exception unwound past it).
  const std::optional<int64_t> seq = claimFailureSequence();
  const int code = exitCodeFor(error);
  const std::string message = headline(error);
  auto log = logger("worker");
  log->error("worker failed (exit code {}): {}", code, message);
  const char* path = std::getenv("TORCHELASTIC_ERROR_FILE");
  if (path != nullptr && *path != '\0') {
    try {
      writeErrorFile(path, message, exceptionChain(error), std::time(nullptr), seq,
                     lastReportedStep());
    } catch (const std::exception& e) {
      log->error("{}", e.what());
    }
  }
  return code;
}

}  // namespace

int runWorkerMain(int argc, char** argv, const std::function<int(int, char**)>& fn) {
  try {
    return fn(argc, argv);
  } catch (...) {
    try {
      return reportFailure(std::current_exception());
    } catch (...) {
      return kExitFailure;  // logging itself failed (e.g. out of memory): still exit non-zero
    }
  }
}

}  // namespace ddp
