// GlooCommunicator: the Communicator over Gloo's TCP transport, for host buffers.
//
// Construction runs Gloo's full-mesh rendezvous: every rank publishes its transport addresses in
// the store under `options.storePrefix` and connects one TCP pair to every other rank. The
// transport binds `options.bindAddress`, or else the local address that routes to MASTER_ADDR
// (127.0.0.1 when MASTER_ADDR is loopback).
//
// Every collective uses Gloo's context timeout (= options.timeout): a peer that does not take part
// in time, or a broken pair, raises CommError naming the op, rank, size and budget. Errors are
// sticky: after one, every call rethrows it; destroy the communicator (which closes its pairs, so
// peers still waiting fail promptly) and exit.
//
// allreduce on float32 is zero-copy (Gloo reduces in the caller's buffer); the Gloo options for a
// (buffer, count, type) are cached, so a reducer that reuses its bucket buffers pays no set-up per
// call. bfloat16 is reduced by a custom Gloo reduction (float accumulate, round per addition).
//
// Thread safety: one collective at a time (callers serialise); any thread may drive it. abort()
// may come from any thread, also while a collective runs.
#pragma once

#include <atomic>
#include <chrono>
#include <cstdint>
#include <exception>
#include <map>
#include <memory>
#include <string>
#include <tuple>
#include <vector>

#include "worker_runtime/communicator.hpp"

namespace gloo {
class Context;
class AllreduceOptions;
}  // namespace gloo

namespace ddp {

namespace detail {
class AbortSwitch;
}

class GlooCommunicator final : public Communicator {
 public:
  // Blocks until every rank of env.worldSize has connected, up to options.timeout.
  // Throws CommError naming the rank, size, bind address and budget; ConfigError when
  // MASTER_ADDR has no route (and no bindAddress was given).
  GlooCommunicator(const WorkerEnv& env, Store& store, const CommOptions& options);
  ~GlooCommunicator() override;

  int rank() const override { return rank_; }
  int size() const override { return size_; }
  CommBackend backend() const override { return CommBackend::kGloo; }

  // Each blocks until done on this rank, up to timeout(). Throws CommError (sticky).
  void allreduce(void* buf, std::size_t count, DataType type, ReduceOp op) override;
  void broadcast(void* buf, std::size_t bytes, int root) override;
  void barrier() override;
  void allgather(const void* send, void* recv, std::size_t countPerRank, DataType type) override;
  void reduceScatter(const void* send, void* recv, std::size_t countPerRank, DataType type,
                     ReduceOp op) override;
  void send(const void* buf, std::size_t bytes, int peer) override;
  void recv(void* buf, std::size_t bytes, int peer) override;

  // The budget of each collective.
  std::chrono::milliseconds timeout() const { return timeout_; }
  // Changes the budget of later collectives (e.g. a generous one for connecting, a tight one for
  // steady-state steps). Must not be called while a collective is in flight. Throws ConfigError
  // for a non-positive budget.
  void setTimeout(std::chrono::milliseconds timeout);
  // Fails the operation in flight and every later one (CommError), wherever it blocks: shuts
  // down the connections to every peer (shutdown(2), the descriptors stay Gloo's), then wakes
  // every wait of the communicator's messages, also one whose message was halfway on the wire
  // when its peer died or froze (Gloo does not wake those: detail/abortable_context.hpp). In that
  // order, nothing the aborted operation goes on to send (it runs to its end without waiting)
  // reaches a peer as a result. The operation that sees it closes the pairs before it throws, so
  // no message lands in the caller's buffers after it. Idempotent.
  void abort() noexcept override;
  // The local address the transport is bound to.
  const std::string& bindAddress() const { return bindAddress_; }
  // The underlying Gloo context, for benchmarks that call Gloo directly on the same connections.
  // Do not run Gloo ops on it while a collective of this communicator is in flight.
  std::shared_ptr<gloo::Context> glooContext() const { return context_; }

 private:
  template <typename Fn>
  void guarded(const char* op, std::size_t count, DataType type, Fn&& fn);
  // what() names the operation in the error ("allreduce of 4 float32 elements"); it is called
  // only when fn failed.
  template <typename What, typename Fn>
  void guardedAs(What&& what, Fn&& fn);
  gloo::AllreduceOptions& allreduceOptions(void* buf, std::size_t count, DataType type);
  uint32_t nextTag() { return tag_++; }
  // The Gloo slot of the next message between this rank and `peer` (either way: the two sides
  // count the same sends and receives).
  uint64_t nextPeerSlot(int peer);

  int rank_;
  int size_;
  std::chrono::milliseconds timeout_;
  std::string bindAddress_;
  std::shared_ptr<gloo::Context> context_;
  uint32_t tag_ = 0;
  std::vector<uint64_t> peerMessages_;  // per peer: the messages exchanged with it so far
  std::exception_ptr error_;  // the sticky error, once a collective failed
  std::map<int, uint64_t> pairSockets_;  // the connections to the peers: descriptor -> inode (abort())
  std::atomic<bool> aborting_{false};  // abort() was called (it acts once)
  std::shared_ptr<detail::AbortSwitch> abortSwitch_;  // every message's waits (abort())
  using CacheKey = std::tuple<void*, std::size_t, DataType>;
  std::map<CacheKey, std::unique_ptr<gloo::AllreduceOptions>> allreduceCache_;
};

}  // namespace ddp
