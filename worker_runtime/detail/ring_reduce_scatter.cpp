#include "worker_runtime/detail/ring_reduce_scatter.hpp"

#include <algorithm>
#include <cstring>
#include <vector>

#include <gloo/common/error.h>
#include <gloo/transport/unbound_buffer.h>
#include <gloo/types.h>

namespace ddp::detail {
namespace {

// Outside Gloo's own slot prefixes (0x01..0x08 in this Gloo release).
constexpr uint8_t kReduceScatterSlotPrefix = 0x21;

void waitOrThrow(bool completed, const char* what) {
  if (!completed) GLOO_THROW_IO_EXCEPTION("reduce-scatter ", what, " was aborted");
}

// What is left of the collective's budget; at least 1 ms so Gloo still reports its own timeout.
std::chrono::milliseconds remaining(std::chrono::steady_clock::time_point deadline) {
  auto left = std::chrono::duration_cast<std::chrono::milliseconds>(
      deadline - std::chrono::steady_clock::now());
  return std::max(left, std::chrono::milliseconds(1));
}

}  // namespace

void ringReduceScatter(const std::shared_ptr<gloo::Context>& context,
                       const RingReduceScatterArgs& args) {
  const int size = context->size;
  const int rank = context->rank;
  const std::size_t blockBytes = args.count * args.elementSize;
  if (size == 1 || blockBytes == 0) {
    if (blockBytes != 0) std::memmove(args.recv, args.send, blockBytes);
    return;
  }
  // Work on a copy: the ring accumulates partial sums in place.
  std::vector<char> work(static_cast<const char*>(args.send),
                         static_cast<const char*>(args.send) + blockBytes * size);
  std::vector<char> incoming(blockBytes);
  auto workBuf = context->createUnboundBuffer(work.data(), work.size());
  auto inBuf = context->createUnboundBuffer(incoming.data(), incoming.size());
  const uint64_t slot = gloo::Slot::build(kReduceScatterSlotPrefix, args.tag);
  const int right = (rank + 1) % size;
  const int left = (rank + size - 1) % size;
  const auto deadline = std::chrono::steady_clock::now() + args.timeout;
  auto block = [size](int i) { return static_cast<std::size_t>(((i % size) + size) % size); };

  // Step s: send block (rank-s-1), receive block (rank-s-2) and add it to ours; after size-1 steps
  // block `rank` holds the sum over every rank.
  for (int step = 0; step < size - 1; ++step) {
    const std::size_t sendBlock = block(rank - step - 1);
    const std::size_t recvBlock = block(rank - step - 2);
    workBuf->send(right, slot, sendBlock * blockBytes, blockBytes);
    inBuf->recv(left, slot, 0, blockBytes);
    waitOrThrow(inBuf->waitRecv(remaining(deadline)), "recv");
    char* target = work.data() + recvBlock * blockBytes;
    args.reduce(target, target, incoming.data(), args.count);
  }
  for (int step = 0; step < size - 1; ++step) waitOrThrow(workBuf->waitSend(remaining(deadline)), "send");
  std::memcpy(args.recv, work.data() + static_cast<std::size_t>(rank) * blockBytes, blockBytes);
}

}  // namespace ddp::detail

