// ShmAllreduce: a Communicator whose float32 allreduce goes through one POSIX shared-memory
// segment when every rank of the group runs on this host (the usual `--nproc-per-node=N` job);
// every other collective, and bf16, is passed to the inner communicator (Gloo).
//
// Why: Gloo has no shared-memory transport, so two ranks on one host sum their gradients over
// loopback TCP, and on a small machine the kernel's copies cost as much CPU as the step's GEMMs.
// Here each rank copies its buffer into its slot of the segment, then reduces its 1/N of the
// elements by summing the N slots in rank order into a shared result, then copies the result
// back. Every element is summed exactly once, by one rank, so the result is bit-identical on all
// ranks. Buffers larger than the segment's chunk go through in chunks.
//
// Synchronisation: one 32-bit sequence word per rank (a futex word); a rank publishes the phase
// it has finished (release) and waits (acquire) for every peer to publish it: a spin of up to
// 50 us, then futex waits of at most 10 ms, between which it checks the collective's budget and
// whether a peer has left: its destructor sets a flag next to its sequence word (a rank that is
// done; a rank unwinding from its own error does not, so that its failure is recorded before the
// peers' collateral CommErrors), and a pidfd per peer catches one that exited or was killed; with
// in-place recovery, a new quorum on the agent's board ends the wait too.
//
// Set-up (tryCreate) is a collective over the inner communicator: the ranks exchange boot id,
// IPC/PID namespace and pid; if they differ anywhere, or the segment cannot be created, sized or
// opened on some rank, every rank gets nullptr and keeps using the inner communicator. Rank 0
// unlinks the segment's name as soon as every rank has mapped it, and every rank that knows the
// name does when the set-up fails (a peer died during it), so a killed job leaves nothing in
// /dev/shm; ddprun removes the segments of a worker that died before it could
// (workerExitStatus, launcher/workers/worker_process.hpp).
//
// Thread safety: like every Communicator, one collective at a time per object; collectives may run
// on another thread than the one that built it. Errors are sticky (CommError).
#pragma once

#include <atomic>
#include <chrono>
#include <cstddef>
#include <cstdint>
#include <exception>
#include <memory>
#include <string>
#include <vector>

#include "worker_runtime/communicator.hpp"

namespace ddp {

struct ShmAllreduceOptions {
  std::chrono::milliseconds timeout{std::chrono::seconds(300)};  // budget per collective
  std::size_t chunkFloats = std::size_t(1) << 20;                // per-rank slot (4 MiB)
  std::string hostKey;  // tests: replaces the boot id / namespace identity ("" = the real one)
  // In-place recovery (worker_runtime/elastic_group.hpp): while this word still reads
  // quorumEpochSeen the group is current; once it moves (the agent published a new quorum), a
  // rank waiting for its peers gives up with CommError within 10 ms. Null: not watched.
  const std::atomic<uint32_t>* quorumEpoch = nullptr;
  uint32_t quorumEpochSeen = 0;
};

class ShmAllreduce final : public Communicator {
 public:
  // Collective over `inner` (every rank must call it at the same point). Returns nullptr when the
  // ranks are not all on this host or shared memory is unavailable; then nothing was changed.
  // Throws CommError when a set-up collective of `inner` fails. `inner` must outlive the result.
  static std::unique_ptr<ShmAllreduce> tryCreate(Communicator& inner, ShmAllreduceOptions options);
  ~ShmAllreduce() override;
  ShmAllreduce(const ShmAllreduce&) = delete;
  ShmAllreduce& operator=(const ShmAllreduce&) = delete;

  int rank() const override { return inner_.rank(); }
  int size() const override { return inner_.size(); }
  CommBackend backend() const override { return inner_.backend(); }

  // float32: through shared memory, blocking until every rank has contributed (budget: the
  // options' timeout; a peer that exits fails it at once). Throws CommError (sticky).
  // bf16: the inner communicator.
  void allreduce(void* buf, std::size_t count, DataType type, ReduceOp op) override;
  void broadcast(void* buf, std::size_t bytes, int root) override;
  void barrier() override;
  void allgather(const void* send, void* recv, std::size_t countPerRank, DataType type) override;
  void reduceScatter(const void* send, void* recv, std::size_t countPerRank, DataType type,
                     ReduceOp op) override;
  void send(const void* buf, std::size_t bytes, int peer) override;
  void recv(void* buf, std::size_t bytes, int peer) override;

 private:
  struct Peer {
    int pid = 0;
    int pidfd = -1;
  };
  ShmAllreduce(Communicator& inner, ShmAllreduceOptions options, void* base, std::size_t bytes,
               std::vector<Peer> peers);
  void allreduceChunk(float* buf, std::size_t count, bool average);
  // Publishes phase `seq_` for this rank, then blocks until every rank published it.
  void phaseBarrier();
  void waitForPeer(int peer, uint32_t target, std::chrono::steady_clock::time_point deadline);
  void checkPeerAlive(int peer);
  uint32_t* seqWord(int r) const;
  uint32_t* leftWord(int r) const;  // set by a rank's destructor
  float* slot(int r) const;
  float* result() const;

  Communicator& inner_;
  ShmAllreduceOptions options_;
  void* base_;
  std::size_t bytes_;
  std::vector<Peer> peers_;
  uint32_t seq_ = 0;  // last phase this rank published
  std::exception_ptr error_;
};

}  // namespace ddp
