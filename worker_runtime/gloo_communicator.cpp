#include "worker_runtime/gloo_communicator.hpp"

#include <sys/socket.h>

#include <cstring>
#include <exception>

#include <gloo/allgather.h>
#include <gloo/allreduce.h>
#include <gloo/barrier.h>
#include <gloo/broadcast.h>
#include <gloo/rendezvous/context.h>
#include <gloo/transport/unbound_buffer.h>
#include <gloo/transport/tcp/device.h>

#include "rendezvous/base/error.hpp"
#include "rendezvous/base/logging.hpp"
#include "worker_runtime/failure_sequence.hpp"
#include "worker_runtime/detail/abortable_context.hpp"
#include "worker_runtime/detail/gloo_loop_ticker.hpp"
#include "worker_runtime/detail/gloo_store_adapter.hpp"
#include "rendezvous/base/local_address.hpp"
#include "worker_runtime/detail/reductions.hpp"
#include "worker_runtime/detail/ring_reduce_scatter.hpp"
#include "worker_runtime/detail/socket_scan.hpp"
#include "worker_runtime/worker_env.hpp"

namespace ddp {
namespace {

// The top byte of a point-to-point message's Gloo slot. Gloo's collectives use slots
// (prefix << 56) | tag with the prefixes 0x01-0x08 of gloo/types.h: none matches this one.
constexpr uint64_t kPeerSlotPrefix = uint64_t(0x70) << 56;

// Most cached allreduce set-ups; a reducer reuses a handful of bucket buffers, so a full cache
// means buffers are not being reused and the cache is simply reset.
constexpr std::size_t kMaxCachedAllreduces = 256;

const char* typeName(DataType type) {
  switch (type) {
    case DataType::kFloat32:
      return "float32";
    case DataType::kBFloat16:
      return "bfloat16";
  }
  return "?";
}

std::shared_ptr<gloo::Context> connect(int rank, int size, const std::string& bindAddress,
                                       Store& store, const CommOptions& options,
                                       std::shared_ptr<detail::AbortSwitch> abortSwitch) {
  gloo::transport::tcp::attr attr;
  attr.hostname = bindAddress;
  auto device = gloo::transport::tcp::CreateDevice(attr);
  auto context = std::make_shared<detail::AbortableContext>(rank, size);
  context->setTimeout(options.timeout);
  detail::GlooStoreAdapter adapter(store, options.storePrefix + "/gloo", options.timeout);
  detail::LoopTicker ticker(device);  // each pair's connect waits for a turn of Gloo's loop
  context->connectFullMesh(adapter, device);
  context->attach(std::move(abortSwitch));
  return context;
}

}  // namespace

GlooCommunicator::GlooCommunicator(const WorkerEnv& env, Store& store, const CommOptions& options)
    : rank_(env.rank), size_(env.worldSize), timeout_(options.timeout),
      abortSwitch_(std::make_shared<detail::AbortSwitch>()) {
  if (timeout_.count() <= 0) throw ConfigError("communicator timeout must be positive");
  bindAddress_ = options.bindAddress.empty()
                     ? localAddressTowards(env.master.host, static_cast<uint16_t>(env.master.port))
                     : options.bindAddress;
  auto start = std::chrono::steady_clock::now();
  const detail::SocketTable before = detail::socketDescriptors();
  try {
    context_ = connect(rank_, size_, bindAddress_, store, options, abortSwitch_);
    // connectFullMesh can return on one side of a pair before the other side finished its
    // handshake; a rank that left right away would break its peer's construction. After this
    // barrier every rank has finished connecting.
    gloo::BarrierOptions barrier(context_);
    barrier.setTag(nextTag());
    barrier.setTimeout(timeout_);
    gloo::barrier(barrier);
  } catch (const std::exception& e) {
    throw CommError("rank " + std::to_string(rank_) + " of " + std::to_string(size_) +
                    " could not build the Gloo communicator (bound to " + bindAddress_ +
                    ", budget " + std::to_string(timeout_.count()) + " ms): " + e.what());
  }
  pairSockets_ = detail::identify(
      detail::connectionsOpenedSince(before, static_cast<uint16_t>(env.master.port)));
  auto ms = std::chrono::duration_cast<std::chrono::milliseconds>(
      std::chrono::steady_clock::now() - start);
  logger("worker")->debug("gloo communicator rank {} of {} on {} connected in {} ms", rank_, size_,
                          bindAddress_, ms.count());
}

GlooCommunicator::~GlooCommunicator() {
  // Torn down by an exception: take this failure's place in the job's order before the
  // connections close, since closing them is what makes the peers fail (failure_sequence.hpp).
  if (std::uncaught_exceptions() > 0) claimFailureSequence();
  // Each pair waits for a turn of Gloo's loop as it closes (gloo_loop_ticker.hpp).
  if (context_ && context_.use_count() == 1) {
    detail::LoopTicker ticker(context_->getDevice());
    context_.reset();
  }
}

void GlooCommunicator::abort() noexcept {
  // Once: the descriptors may be closed (and reused) once the aborted operation closed its pairs.
  if (aborting_.exchange(true)) return;
  // The connections first, the waits after. A Gloo collective whose waits were aborted runs on to
  // its end without waiting and sends what its buffers hold, which is no result: a peer still
  // in the same collective would take it for one (and commit a step with those gradients). Shut
  // down, a connection sends nothing more, and that peer's collective fails instead. (The
  // aborted operation closes its pairs only once the switch is thrown, so the descriptors are
  // still Gloo's here.)
  detail::shutDownSame(pairSockets_);
  abortSwitch_->abort();
}

void GlooCommunicator::setTimeout(std::chrono::milliseconds timeout) {
  if (timeout.count() <= 0) throw ConfigError("communicator timeout must be positive");
  timeout_ = timeout;
  context_->setTimeout(timeout);
  allreduceCache_.clear();  // cached options carry the old budget
}

template <typename What, typename Fn>
void GlooCommunicator::guardedAs(What&& what, Fn&& fn) {
  if (error_) std::rethrow_exception(error_);
  std::string why;
  try {
    if (abortSwitch_->aborted()) throw CommError("the communicator was aborted");
    fn();
    // Gloo's collectives run on past an aborted wait (they ignore its result): whatever they
    // left in the buffers is not a result.
    if (abortSwitch_->aborted()) throw CommError("the communicator was aborted");
    return;
  } catch (const std::exception& e) {
    why = e.what();
  }
  if (abortSwitch_->aborted()) {
    // Close every pair before the caller gets its buffers back: a pair still open could go on
    // writing a message that was on its way into them (Pair::close waits for the read in hand).
    try {
      context_->closeConnections();
    } catch (const std::exception&) {
      // A pair that failed to close has failed already: it reads nothing more.
    }
  }
  error_ = std::make_exception_ptr(CommError(
      "gloo " + what() + " failed on rank " + std::to_string(rank_) + " of " +
      std::to_string(size_) + " (budget " + std::to_string(timeout_.count()) +
      " ms; the communicator is now unusable): " + why));
  std::rethrow_exception(error_);
}

template <typename Fn>
void GlooCommunicator::guarded(const char* op, std::size_t count, DataType type, Fn&& fn) {
  guardedAs([&] {
    return std::string(op) + " of " + std::to_string(count) + " " + typeName(type) + " elements";
  }, std::forward<Fn>(fn));
}

gloo::AllreduceOptions& GlooCommunicator::allreduceOptions(void* buf, std::size_t count,
                                                           DataType type) {
  CacheKey key{buf, count, type};
  auto it = allreduceCache_.find(key);
  if (it != allreduceCache_.end()) return *it->second;
  if (allreduceCache_.size() >= kMaxCachedAllreduces) allreduceCache_.clear();
  auto opts = std::make_unique<gloo::AllreduceOptions>(context_);
  opts->setTimeout(timeout_);
  switch (type) {
    case DataType::kFloat32:
      opts->setOutput(static_cast<float*>(buf), count);
      break;
    case DataType::kBFloat16:
      opts->setOutput(static_cast<uint16_t*>(buf), count);
      break;
  }
  opts->setReduceFunction(detail::sumFunction(type));
  return *allreduceCache_.emplace(key, std::move(opts)).first->second;
}

void GlooCommunicator::allreduce(void* buf, std::size_t count, DataType type, ReduceOp op) {
  guarded("allreduce", count, type, [&] {
    if (count == 0 || size_ == 1) return;
    auto& opts = allreduceOptions(buf, count, type);
    opts.setTag(nextTag());
    gloo::allreduce(opts);
    if (op == ReduceOp::kAvg) detail::divideInPlace(buf, count, type, size_);
  });
}

void GlooCommunicator::broadcast(void* buf, std::size_t bytes, int root) {
  if (root < 0 || root >= size_) {
    throw ConfigError("broadcast root " + std::to_string(root) + " is not a rank of a group of " +
                      std::to_string(size_));
  }
  guarded("broadcast", bytes, DataType::kFloat32, [&] {
    if (bytes == 0 || size_ == 1) return;
    gloo::BroadcastOptions opts(context_);
    opts.setOutput(static_cast<uint8_t*>(buf), bytes);
    opts.setRoot(root);
    opts.setTag(nextTag());
    opts.setTimeout(timeout_);
    gloo::broadcast(opts);
  });
}

void GlooCommunicator::barrier() {
  guarded("barrier", 0, DataType::kFloat32, [&] {
    if (size_ == 1) return;
    gloo::BarrierOptions opts(context_);
    opts.setTag(nextTag());
    opts.setTimeout(timeout_);
    gloo::barrier(opts);
  });
}

void GlooCommunicator::allgather(const void* send, void* recv, std::size_t countPerRank,
                                 DataType type) {
  guarded("allgather", countPerRank, type, [&] {
    const std::size_t blockBytes = countPerRank * detail::elementSize(type);
    auto* out = static_cast<uint8_t*>(recv);
    auto* mine = out + static_cast<std::size_t>(rank_) * blockBytes;
    if (blockBytes == 0) return;
    if (size_ == 1) {
      if (send != mine) std::memmove(mine, send, blockBytes);
      return;
    }
    gloo::AllgatherOptions opts(context_);
    // Gloo copies the input into this rank's block; skip that when it is already there.
    if (send != mine) opts.setInput(const_cast<uint8_t*>(static_cast<const uint8_t*>(send)), blockBytes);
    opts.setOutput(out, blockBytes * static_cast<std::size_t>(size_));
    opts.setTag(nextTag());
    opts.setTimeout(timeout_);
    gloo::allgather(opts);
  });
}

void GlooCommunicator::reduceScatter(const void* send, void* recv, std::size_t countPerRank,
                                     DataType type, ReduceOp op) {
  guarded("reduce-scatter", countPerRank, type, [&] {
    detail::RingReduceScatterArgs args;
    args.send = send;
    args.recv = recv;
    args.count = countPerRank;
    args.elementSize = detail::elementSize(type);
    args.reduce = detail::sumFunction(type);
    args.tag = nextTag();
    args.timeout = timeout_;
    detail::ringReduceScatter(context_, args);
    if (op == ReduceOp::kAvg) detail::divideInPlace(recv, countPerRank, type, size_);
  });
}

uint64_t GlooCommunicator::nextPeerSlot(int peer) {
  if (peer < 0 || peer >= size_ || peer == rank_) {
    throw ConfigError("point-to-point peer " + std::to_string(peer) + " is not another rank of a "
                      "group of " + std::to_string(size_) + " (this is rank " +
                      std::to_string(rank_) + ")");
  }
  if (peerMessages_.empty()) peerMessages_.assign(std::size_t(size_), 0);
  return kPeerSlotPrefix | peerMessages_[std::size_t(peer)]++;
}

void GlooCommunicator::send(const void* buf, std::size_t bytes, int peer) {
  const uint64_t slot = nextPeerSlot(peer);
  auto what = [&] {
    return "send of " + std::to_string(bytes) + " bytes to rank " + std::to_string(peer);
  };
  guardedAs(what, [&] {
    if (bytes == 0) return;
    auto message = context_->createUnboundBuffer(const_cast<void*>(buf), bytes);
    message->send(peer, slot);
    if (!message->waitSend(timeout_)) throw CommError("the send was aborted");
  });
}

void GlooCommunicator::recv(void* buf, std::size_t bytes, int peer) {
  const uint64_t slot = nextPeerSlot(peer);
  auto what = [&] {
    return "receive of " + std::to_string(bytes) + " bytes from rank " + std::to_string(peer);
  };
  guardedAs(what, [&] {
    if (bytes == 0) return;
    auto message = context_->createUnboundBuffer(buf, bytes);
    message->recv(peer, slot);
    if (!message->waitRecv(timeout_)) throw CommError("the receive was aborted");
  });
}

}  // namespace ddp
