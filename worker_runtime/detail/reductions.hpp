// Element-wise reductions in the shape Gloo's algorithms call them: out[i] = a[i] + b[i] for n
// elements (out may alias a or b), plus the in-place scaling that turns a sum into an average.
//
// bfloat16 sums are computed in float and rounded once per addition (as NCCL and PyTorch do on
// CPU), so sums of small integers are exact.
//
// Thread safety: pure functions.
#pragma once

#include <cstddef>

#include "worker_runtime/communicator.hpp"

namespace ddp::detail {

using ReduceFn = void (*)(void* out, const void* a, const void* b, std::size_t n);

void sumFloat32(void* out, const void* a, const void* b, std::size_t n);
void sumBFloat16(void* out, const void* a, const void* b, std::size_t n);

// The summing function and the element size for `type`.
ReduceFn sumFunction(DataType type);
std::size_t elementSize(DataType type);

// buf[i] /= divisor for `count` elements of `type`.
void divideInPlace(void* buf, std::size_t count, DataType type, int divisor);

}  // namespace ddp::detail
