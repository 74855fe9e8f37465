// NcclCommunicator: the Communicator over NCCL, for device buffers (built only with DDP_WITH_CUDA).
//
// Construction: rank 0 creates the NCCL unique id and publishes it in the store under
// `options.storePrefix + "/nccl/unique_id"`; every rank reads it and joins with a *nonblocking*
// ncclCommInitRankConfig that is polled against options.timeout, so a missing rank makes init fail
// with CommError instead of hanging. The device is CUDA device LOCAL_RANK (or options.device).
//
// Each collective is enqueued on the communicator's own stream, ordered after the work already
// queued on the stream given to setStream() (default: the legacy default stream), and the call
// returns once it has completed on the device. Completion is polled (cudaStreamQuery and
// ncclCommGetAsyncError) against options.timeout; on a timeout or an asynchronous NCCL error the
// communicator aborts (ncclCommAbort) and throws CommError naming the op, rank, size and budget.
// Errors are sticky.
//
// Thread safety: one collective at a time; any thread may drive it (the device is set per call).
#pragma once

#include <atomic>
#include <chrono>
#include <exception>
#include <memory>
#include <string>

#include "worker_runtime/communicator.hpp"

namespace ddp {

class NcclCommunicator final : public Communicator {
 public:
  // Blocks until every rank joined, up to options.timeout. Throws CommError (init failed or timed
  // out), ConfigError (no CUDA device, or LOCAL_RANK is not a valid device index).
  NcclCommunicator(const WorkerEnv& env, Store& store, const CommOptions& options);
  ~NcclCommunicator() override;

  int rank() const override { return rank_; }
  int size() const override { return size_; }
  CommBackend backend() const override { return CommBackend::kNccl; }

  // Each blocks until the op completed on the device, up to the timeout. Throws CommError (sticky).
  void allreduce(void* buf, std::size_t count, DataType type, ReduceOp op) override;
  void broadcast(void* buf, std::size_t bytes, int root) override;
  void barrier() override;
  void allgather(const void* send, void* recv, std::size_t countPerRank, DataType type) override;
  void reduceScatter(const void* send, void* recv, std::size_t countPerRank, DataType type,
                     ReduceOp op) override;
  void send(const void* buf, std::size_t bytes, int peer) override;
  void recv(void* buf, std::size_t bytes, int peer) override;
  // Later collectives follow the work queued on `cudaStream` (a cudaStream_t) at call time.
  void setStream(void* cudaStream) override;
  // The collective polled on another thread fails within a poll (the communicator is aborted
  // there, by ncclCommAbort, and unusable), as does every later one. Any thread; never blocks.
  void abort() noexcept override { abortRequested_.store(true, std::memory_order_release); }

  // The CUDA device this communicator uses.
  int device() const { return device_; }

  // True when this binary was built with CUDA and at least one device is visible. Never throws.
  static bool deviceAvailable();

 private:
  struct State;
  template <typename Enqueue>
  void run(const char* op, std::size_t count, Enqueue&& enqueue);
  // Throws ConfigError unless `peer` is another rank of the group.
  void checkPeer(int peer) const;

  int rank_;
  int size_;
  int device_ = 0;
  std::chrono::milliseconds timeout_;
  std::unique_ptr<State> state_;
  std::exception_ptr error_;  // the sticky error
  std::atomic<bool> abortRequested_{false};  // abort(): the polling thread aborts NCCL
};

}  // namespace ddp
