#include "worker_runtime/detail/reductions.hpp"

#include <cstdint>

#include "worker_runtime/bfloat16.hpp"

namespace ddp::detail {

void sumFloat32(void* out, const void* a, const void* b, std::size_t n) {
  auto* o = static_cast<float*>(out);
  const auto* x = static_cast<const float*>(a);
  const auto* y = static_cast<const float*>(b);
  for (std::size_t i = 0; i < n; ++i) o[i] = x[i] + y[i];
}

void sumBFloat16(void* out, const void* a, const void* b, std::size_t n) {
  auto* o = static_cast<BFloat16Bits*>(out);
  const auto* x = static_cast<const BFloat16Bits*>(a);
  const auto* y = static_cast<const BFloat16Bits*>(b);
  for (std::size_t i = 0; i < n; ++i) o[i] = floatToBf16(bf16ToFloat(x[i]) + bf16ToFloat(y[i]));
}

ReduceFn sumFunction(DataType type) {
  switch (type) {
    case DataType::kFloat32:
      return &sumFloat32;
    case DataType::kBFloat16:
      return &sumBFloat16;
  }
  return &sumFloat32;
}

std::size_t elementSize(DataType type) {
  switch (type) {
    case DataType::kFloat32:
      return sizeof(float);
    case DataType::kBFloat16:
      return sizeof(BFloat16Bits);
  }
  return sizeof(float);
}

void divideInPlace(void* buf, std::size_t count, DataType type, int divisor) {
  if (divisor == 1) return;
  const auto d = static_cast<float>(divisor);
  switch (type) {
    case DataType::kFloat32: {
      auto* p = static_cast<float*>(buf);
      for (std::size_t i = 0; i < count; ++i) p[i] /= d;
      return;
    }
    case DataType::kBFloat16: {
      auto* p = static_cast<BFloat16Bits*>(buf);
      for (std::size_t i = 0; i < count; ++i) p[i] = floatToBf16(bf16ToFloat(p[i]) / d);
      return;
    }
  }
}

}  // namespace ddp::detail
