// ringReduceScatter: reduce-scatter over a Gloo context with the bandwidth-optimal ring
// (size-1 steps, each rank sends and receives one block per step), built on Gloo's unbound
// buffers because Debian's Gloo has no typed reduce-scatter for arbitrary element types.
//
// Thread safety: one collective at a time per context.
#pragma once

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <memory>

#include <gloo/context.h>

#include "worker_runtime/detail/reductions.hpp"

namespace ddp::detail {

struct RingReduceScatterArgs {
  const void* send = nullptr;      // size * blockBytes bytes; rank r's block at r * blockBytes
  void* recv = nullptr;            // blockBytes bytes: this rank's reduced block
  std::size_t count = 0;           // elements per block
  std::size_t elementSize = 0;     // bytes per element
  ReduceFn reduce = nullptr;       // element-wise sum
  uint32_t tag = 0;                // same on every rank for this call
  std::chrono::milliseconds timeout{0};  // budget of the whole collective
};

// Blocks until this rank's block is reduced. Throws gloo::IoException on a timeout or a broken
// pair (the caller turns it into CommError).
void ringReduceScatter(const std::shared_ptr<gloo::Context>& context,
                       const RingReduceScatterArgs& args);

}  // namespace ddp::detail
