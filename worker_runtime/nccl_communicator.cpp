#include "worker_runtime/nccl_communicator.hpp"

#include <cstring>
#include <exception>
#include <thread>

#include <cuda_runtime_api.h>
#include <nccl.h>

#include "rendezvous/base/error.hpp"
#include "rendezvous/base/logging.hpp"
#include "rendezvous/store/store.hpp"
#include "worker_runtime/failure_sequence.hpp"
#include "worker_runtime/detail/reductions.hpp"
#include "worker_runtime/worker_env.hpp"

namespace ddp {

struct NcclCommunicator::State {
  ncclComm_t comm = nullptr;
  cudaStream_t stream = nullptr;      // ours: every collective runs here
  cudaStream_t userStream = cudaStreamLegacy;  // what collectives must follow
  cudaEvent_t ready = nullptr;        // recorded on userStream, waited on by stream
  float* scratch = nullptr;           // one device float for barrier()
  bool aborted = false;
  int device = 0;

  // Runs also when the constructor throws half way, so every resource is released.
  ~State() {
    cudaSetDevice(device);
    // Finalize could block on a peer that is gone; abort is always bounded.
    if (comm != nullptr && !aborted) ncclCommAbort(comm);
    if (scratch != nullptr) cudaFree(scratch);
    if (ready != nullptr) cudaEventDestroy(ready);
    if (stream != nullptr) cudaStreamDestroy(stream);
  }
};

namespace {

using Clock = std::chrono::steady_clock;

std::string cudaText(cudaError_t err) { return std::string(cudaGetErrorString(err)); }

void cudaCheck(cudaError_t err, const char* what) {
  if (err != cudaSuccess) throw CommError(std::string(what) + " failed: " + cudaText(err));
}

ncclDataType_t ncclType(DataType type) {
  switch (type) {
    case DataType::kFloat32:
      return ncclFloat32;
    case DataType::kBFloat16:
      return ncclBfloat16;
  }
  return ncclFloat32;
}

ncclRedOp_t ncclOp(ReduceOp op) {
  switch (op) {
    case ReduceOp::kSum:
      return ncclSum;
    case ReduceOp::kAvg:
      return ncclAvg;
  }
  return ncclSum;
}

// Short spins first (low latency for small collectives), then brief sleeps to spare the CPU.
void pause(int& round) {
  if (++round < 1000) {
    std::this_thread::yield();
  } else {
    std::this_thread::sleep_for(std::chrono::microseconds(50));
  }
}

// Polls a nonblocking communicator until its pending call left ncclInProgress.
ncclResult_t pollAsync(ncclComm_t comm, Clock::time_point deadline) {
  ncclResult_t state = ncclInProgress;
  for (int round = 0;; pause(round)) {
    ncclResult_t rc = ncclCommGetAsyncError(comm, &state);
    if (rc != ncclSuccess) return rc;
    if (state != ncclInProgress) return state;
    if (Clock::now() >= deadline) return ncclInProgress;
  }
}

ncclUniqueId shareUniqueId(int rank, Store& store, const std::string& key,
                           std::chrono::milliseconds timeout) {
  ncclUniqueId id;
  if (rank == 0) {
    ncclResult_t rc = ncclGetUniqueId(&id);
    if (rc != ncclSuccess) throw CommError(std::string("ncclGetUniqueId: ") + ncclGetErrorString(rc));
    store.set(key, std::string(id.internal, sizeof(id.internal)));
    return id;
  }
  store.wait({key}, timeout);
  std::string bytes = store.get(key);
  if (bytes.size() != sizeof(id.internal)) {
    throw CommError("NCCL unique id at '" + key + "' has " + std::to_string(bytes.size()) +
                    " bytes, expected " + std::to_string(sizeof(id.internal)));
  }
  std::memcpy(id.internal, bytes.data(), sizeof(id.internal));
  return id;
}

int chooseDevice(const WorkerEnv& env, const CommOptions& options) {
  int count = 0;
  cudaError_t err = cudaGetDeviceCount(&count);
  if (err != cudaSuccess || count == 0) {
    throw ConfigError("NCCL communicator needs a CUDA device, but none is usable: " +
                      (err != cudaSuccess ? cudaText(err) : std::string("0 devices")));
  }
  int device = options.device >= 0 ? options.device : env.localRank;
  if (device >= count) {
    throw ConfigError("CUDA device " + std::to_string(device) + " (LOCAL_RANK) does not exist: " +
                      std::to_string(count) + " device(s) visible (check CUDA_VISIBLE_DEVICES)");
  }
  return device;
}

}  // namespace

bool NcclCommunicator::deviceAvailable() {
  int count = 0;
  return cudaGetDeviceCount(&count) == cudaSuccess && count > 0;
}

NcclCommunicator::NcclCommunicator(const WorkerEnv& env, Store& store, const CommOptions& options)
    : rank_(env.rank), size_(env.worldSize), timeout_(options.timeout),
      state_(std::make_unique<State>()) {
  device_ = chooseDevice(env, options);
  state_->device = device_;
  const auto deadline = Clock::now() + timeout_;
  const std::string who = "rank " + std::to_string(rank_) + " of " + std::to_string(size_) +
                          " (device " + std::to_string(device_) + ")";
  cudaCheck(cudaSetDevice(device_), "cudaSetDevice");
  cudaCheck(cudaStreamCreateWithFlags(&state_->stream, cudaStreamNonBlocking), "cudaStreamCreate");
  cudaCheck(cudaEventCreateWithFlags(&state_->ready, cudaEventDisableTiming), "cudaEventCreate");
  cudaCheck(cudaMalloc(reinterpret_cast<void**>(&state_->scratch), sizeof(float)), "cudaMalloc");
  ncclUniqueId id;
  try {
    id = shareUniqueId(rank_, store, options.storePrefix + "/nccl/unique_id", timeout_);
  } catch (const Error& e) {
    throw CommError(who + " could not get the NCCL unique id: " + e.what());
  }
  ncclConfig_t config = NCCL_CONFIG_INITIALIZER;
  config.blocking = 0;
  ncclResult_t rc = ncclCommInitRankConfig(&state_->comm, size_, id, rank_, &config);
  if (rc == ncclInProgress || rc == ncclSuccess) rc = pollAsync(state_->comm, deadline);
  if (rc != ncclSuccess) {
    std::string why = rc == ncclInProgress
                          ? "timed out after " + std::to_string(timeout_.count()) +
                                " ms waiting for every rank to join"
                          : std::string(ncclGetErrorString(rc));
    if (state_->comm != nullptr) ncclCommAbort(state_->comm);
    state_->comm = nullptr;
    throw CommError(who + " could not initialise NCCL: " + why);
  }
  logger("worker")->debug("nccl communicator {} ready", who);
}

NcclCommunicator::~NcclCommunicator() {
  // Torn down by an exception: take this failure's place in the job's order before the
  // connections close, since closing them is what makes the peers fail (failure_sequence.hpp).
  if (std::uncaught_exceptions() > 0) claimFailureSequence();
}

void NcclCommunicator::setStream(void* cudaStream) {
  state_->userStream = cudaStream == nullptr ? cudaStreamLegacy
                                             : static_cast<cudaStream_t>(cudaStream);
}

template <typename Enqueue>
void NcclCommunicator::run(const char* op, std::size_t count, Enqueue&& enqueue) {
  if (error_) std::rethrow_exception(error_);
  const auto deadline = Clock::now() + timeout_;
  if (abortRequested_.load(std::memory_order_acquire)) {
    error_ = std::make_exception_ptr(CommError(std::string("nccl ") + op + " on rank " +
        std::to_string(rank_) + ": the communicator was aborted"));
    std::rethrow_exception(error_);
  }
  auto fail = [&](const std::string& why) {
    ncclCommAbort(state_->comm);
    state_->aborted = true;
    error_ = std::make_exception_ptr(CommError(
        std::string("nccl ") + op + " of " + std::to_string(count) + " elements failed on rank " +
        std::to_string(rank_) + " of " + std::to_string(size_) + " (budget " +
        std::to_string(timeout_.count()) + " ms; the communicator is aborted): " + why));
    std::rethrow_exception(error_);
  };
  cudaError_t err = cudaSetDevice(device_);
  if (err == cudaSuccess) err = cudaEventRecord(state_->ready, state_->userStream);
  if (err == cudaSuccess) err = cudaStreamWaitEvent(state_->stream, state_->ready, 0);
  if (err != cudaSuccess) fail("ordering after the caller's stream: " + cudaText(err));
  ncclResult_t rc = enqueue(state_->comm, state_->stream);
  if (rc == ncclInProgress) rc = pollAsync(state_->comm, deadline);
  if (rc == ncclInProgress) fail("timed out while enqueueing");
  if (rc != ncclSuccess) fail(std::string(ncclGetErrorString(rc)) + ": " + ncclGetLastError(state_->comm));
  for (int round = 0;; pause(round)) {
    err = cudaStreamQuery(state_->stream);
    if (err == cudaSuccess) return;
    if (err != cudaErrorNotReady) fail("CUDA error: " + cudaText(err));
    ncclResult_t async = ncclSuccess;
    ncclCommGetAsyncError(state_->comm, &async);
    if (async != ncclSuccess && async != ncclInProgress) {
      fail(std::string("asynchronous NCCL error: ") + ncclGetErrorString(async));
    }
    if (Clock::now() >= deadline) {
      fail("timed out after " + std::to_string(timeout_.count()) + " ms (a peer did not join)");
    }
    if (abortRequested_.load(std::memory_order_acquire)) {
      fail("aborted: the group moved on to a newer quorum");
    }
  }
}

void NcclCommunicator::allreduce(void* buf, std::size_t count, DataType type, ReduceOp op) {
  run("allreduce", count, [&](ncclComm_t comm, cudaStream_t stream) {
    return ncclAllReduce(buf, buf, count, ncclType(type), ncclOp(op), comm, stream);
  });
}

void NcclCommunicator::broadcast(void* buf, std::size_t bytes, int root) {
  if (root < 0 || root >= size_) {
    throw ConfigError("broadcast root " + std::to_string(root) + " is not a rank of a group of " +
                      std::to_string(size_));
  }
  run("broadcast", bytes, [&](ncclComm_t comm, cudaStream_t stream) {
    return ncclBroadcast(buf, buf, bytes, ncclUint8, root, comm, stream);
  });
}

void NcclCommunicator::barrier() {
  run("barrier", 1, [&](ncclComm_t comm, cudaStream_t stream) {
    return ncclAllReduce(state_->scratch, state_->scratch, 1, ncclFloat32, ncclSum, comm, stream);
  });
}

void NcclCommunicator::allgather(const void* send, void* recv, std::size_t countPerRank,
                                 DataType type) {
  run("allgather", countPerRank, [&](ncclComm_t comm, cudaStream_t stream) {
    return ncclAllGather(send, recv, countPerRank, ncclType(type), comm, stream);
  });
}

void NcclCommunicator::reduceScatter(const void* send, void* recv, std::size_t countPerRank,
                                     DataType type, ReduceOp op) {
  run("reduce-scatter", countPerRank, [&](ncclComm_t comm, cudaStream_t stream) {
    return ncclReduceScatter(send, recv, countPerRank, ncclType(type), ncclOp(op), comm, stream);
  });
}

void NcclCommunicator::checkPeer(int peer) const {
  if (peer < 0 || peer >= size_ || peer == rank_) {
    throw ConfigError("point-to-point peer " + std::to_string(peer) + " is not another rank of a "
                      "group of " + std::to_string(size_) + " (this is rank " +
                      std::to_string(rank_) + ")");
  }
}

void NcclCommunicator::send(const void* buf, std::size_t bytes, int peer) {
  checkPeer(peer);
  run("send", bytes, [&](ncclComm_t comm, cudaStream_t stream) {
    return ncclSend(buf, bytes, ncclUint8, peer, comm, stream);
  });
}

void NcclCommunicator::recv(void* buf, std::size_t bytes, int peer) {
  checkPeer(peer);
  run("receive", bytes, [&](ncclComm_t comm, cudaStream_t stream) {
    return ncclRecv(buf, bytes, ncclUint8, peer, comm, stream);
  });
}

}  // namespace ddp
