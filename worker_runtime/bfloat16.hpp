// bfloat16 <-> float conversions for host code (the upper 16 bits of an IEEE-754 float).
//
// Conversion to bfloat16 rounds to nearest, ties to even, and keeps NaNs quiet NaNs; this matches
// PyTorch's c10::BFloat16 and CUDA's __float2bfloat16_rn, so host and device results agree bit
// for bit.
//
// Thread safety: pure functions.
#pragma once

#include <bit>
#include <cstdint>

namespace ddp {

// The raw bits of a bfloat16 value.
using BFloat16Bits = uint16_t;

inline float bf16ToFloat(BFloat16Bits v) {
  return std::bit_cast<float>(static_cast<uint32_t>(v) << 16);
}

inline BFloat16Bits floatToBf16(float f) {
  uint32_t bits = std::bit_cast<uint32_t>(f);
  if ((bits & 0x7fffffffu) > 0x7f800000u) {
    return static_cast<BFloat16Bits>((bits >> 16) | 0x0040u);  // quiet NaN, sign kept
  }
  uint32_t roundingBias = 0x7fffu + ((bits >> 16) & 1u);
  return static_cast<BFloat16Bits>((bits + roundingBias) >> 16);
}

}  // namespace ddp
