// Communicator: the collectives a data-parallel worker needs, over Gloo (CPU) or NCCL (CUDA).
//
// Every rank of the group must call the same collectives in the same order. Calls block until the
// collective completes on this rank or the communicator's timeout passes; a timeout or a transport
// failure throws CommError and leaves the communicator unusable (sticky: later calls rethrow) —
// the worker should exit non-zero so its agent restarts the group.
//
// Buffers are host memory for Gloo and device memory for NCCL. For NCCL the op is ordered after
// the work already queued on the stream set with setStream() (default: the legacy stream) and the
// call returns once it has completed.
//
// Thread safety: one collective at a time; a communicator may be driven from a thread other than
// the one that built it (the DDP reducer's communication thread).
#pragma once

#include <chrono>
#include <cstddef>
#include <memory>
#include <string>

namespace ddp {

class Store;
struct WorkerEnv;

enum class DataType { kFloat32, kBFloat16 };
enum class ReduceOp { kSum, kAvg };
enum class CommBackend { kAuto, kGloo, kNccl };

class Communicator {
 public:
  virtual ~Communicator() = default;

  virtual int rank() const = 0;
  virtual int size() const = 0;
  virtual CommBackend backend() const = 0;

  // In place: buf[i] = op over ranks of buf[i].
  virtual void allreduce(void* buf, std::size_t count, DataType type, ReduceOp op) = 0;
  // In place: every rank receives root's `bytes` bytes.
  virtual void broadcast(void* buf, std::size_t bytes, int root) = 0;
  virtual void barrier() = 0;
  // recv holds size() * countPerRank elements, rank r's block at offset r * countPerRank.
  virtual void allgather(const void* send, void* recv, std::size_t countPerRank, DataType type) = 0;
  // send holds size() * countPerRank elements; recv gets this rank's reduced block.
  virtual void reduceScatter(const void* send, void* recv, std::size_t countPerRank, DataType type,
                             ReduceOp op) = 0;

  // Point to point, outside the collectives' order: only this rank and `peer` take part. send
  // hands `bytes` bytes of buf to `peer`, whose recv(buf, bytes, this rank) fills its buf; two
  // ranks call their sends and receives to each other in the same order. Each blocks until this
  // rank's part is done (NCCL: completed on the stream). Throws ConfigError for a peer that is not
  // another rank of the group, CommError (sticky) as a collective does.
  virtual void send(const void* buf, std::size_t bytes, int peer) = 0;
  virtual void recv(void* buf, std::size_t bytes, int peer) = 0;

  // CUDA only: the stream whose queued work collectives must follow (a cudaStream_t). No-op for Gloo.
  virtual void setStream(void* /*cudaStream*/) {}

  // Makes a collective blocked on this communicator fail now (CommError), as if every peer had
  // gone: for a peer that vanished without closing its connections (a network cut), which would
  // otherwise hold the collective for its whole budget. The communicator is unusable after it.
  // Any thread, while the communicator is alive (also during a collective on another thread);
  // never blocks, never throws. Gloo: shuts its connections down; others: nothing.
  virtual void abort() noexcept {}
};

struct CommOptions {
  // Which library to use; kAuto = NCCL when built with CUDA and a device is present, else Gloo.
  CommBackend backend = CommBackend::kAuto;
  // Budget for building the communicator and for each collective.
  std::chrono::milliseconds timeout{std::chrono::seconds(300)};
  // Gloo: the local address to bind (empty = the address that routes to MASTER_ADDR).
  std::string bindAddress;
  // NCCL: the CUDA device to use; -1 = LOCAL_RANK.
  int device = -1;
  // Prefix of this communicator's keys in the worker store (several communicators may coexist).
  std::string storePrefix = "ddp/comm";
};

// The backend kAuto stands for in this build on this machine (kNccl or kGloo); others unchanged.
// Never throws.
CommBackend resolveBackend(CommBackend requested);

// Builds a communicator for `env` using `store` for the rendezvous (Gloo addresses / NCCL unique
// id). Blocks until every rank has joined or options.timeout passes. Throws CommError, ConfigError
// (e.g. NCCL asked for in a build without CUDA).
std::unique_ptr<Communicator> makeCommunicator(const WorkerEnv& env, Store& store,
                                               const CommOptions& options);

}  // namespace ddp
