#include "worker_runtime/communicator.hpp"

#include "rendezvous/base/error.hpp"
#include "worker_runtime/gloo_communicator.hpp"
#include "worker_runtime/worker_env.hpp"
#ifdef DDP_WITH_CUDA
#include "worker_runtime/nccl_communicator.hpp"
#endif

namespace ddp {

CommBackend resolveBackend(CommBackend requested) {
  if (requested != CommBackend::kAuto) return requested;
#ifdef DDP_WITH_CUDA
  if (NcclCommunicator::deviceAvailable()) return CommBackend::kNccl;
#endif
  return CommBackend::kGloo;
}

std::unique_ptr<Communicator> makeCommunicator(const WorkerEnv& env, Store& store,
                                               const CommOptions& options) {
  switch (resolveBackend(options.backend)) {
    case CommBackend::kNccl:
#ifdef DDP_WITH_CUDA
      return std::make_unique<NcclCommunicator>(env, store, options);
#else
      throw ConfigError("the NCCL backend was requested but this build has no CUDA support "
                        "(configure with -DDDP_WITH_CUDA=ON)");
#endif
    case CommBackend::kGloo:
    case CommBackend::kAuto:
      break;
  }
  return std::make_unique<GlooCommunicator>(env, store, options);
}

}  // namespace ddp
