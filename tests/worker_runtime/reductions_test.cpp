// bfloat16 conversions and the element-wise reductions the communicators use.
#include <catch2/catch.hpp>

#include <cmath>
#include <cstdint>
#include <limits>
#include <vector>

#include "worker_runtime/bfloat16.hpp"
#include "worker_runtime/detail/reductions.hpp"

TEST_CASE("bfloat16 round-trips exactly representable values", "[bf16]") {
  for (float v : {0.0f, 1.0f, -2.0f, 0.5f, 255.0f, 256.0f, 0x1p100f, -3.140625f}) {
    CHECK(ddp::bf16ToFloat(ddp::floatToBf16(v)) == v);
  }
  CHECK(ddp::floatToBf16(1.0f) == 0x3f80);
}

TEST_CASE("float to bfloat16 rounds to nearest, ties to even", "[bf16]") {
  // 257 lies exactly between 256 and 258 (bf16 has 8 significant bits): ties to even -> 256.
  CHECK(ddp::bf16ToFloat(ddp::floatToBf16(257.0f)) == 256.0f);
  // 259 lies between 258 and 260: tie, even mantissa is 260.
  CHECK(ddp::bf16ToFloat(ddp::floatToBf16(259.0f)) == 260.0f);
  CHECK(ddp::bf16ToFloat(ddp::floatToBf16(257.5f)) == 258.0f);
  CHECK(std::isnan(ddp::bf16ToFloat(ddp::floatToBf16(std::numeric_limits<float>::quiet_NaN()))));
  CHECK(std::isinf(ddp::bf16ToFloat(ddp::floatToBf16(std::numeric_limits<float>::infinity()))));
}

TEST_CASE("sums and averages per element type", "[reductions]") {
  std::vector<float> a{1, 2, 3}, b{10, 20, 30}, out(3);
  ddp::detail::sumFunction(ddp::DataType::kFloat32)(out.data(), a.data(), b.data(), 3);
  CHECK(out == std::vector<float>{11, 22, 33});
  ddp::detail::divideInPlace(out.data(), 3, ddp::DataType::kFloat32, 11);
  CHECK(out == std::vector<float>{1, 2, 3});

  std::vector<uint16_t> x{ddp::floatToBf16(1.5f), ddp::floatToBf16(-4.0f)};
  std::vector<uint16_t> y{ddp::floatToBf16(2.5f), ddp::floatToBf16(1.0f)};
  ddp::detail::sumFunction(ddp::DataType::kBFloat16)(x.data(), x.data(), y.data(), 2);
  CHECK(ddp::bf16ToFloat(x[0]) == 4.0f);
  CHECK(ddp::bf16ToFloat(x[1]) == -3.0f);
  ddp::detail::divideInPlace(x.data(), 2, ddp::DataType::kBFloat16, 2);
  CHECK(ddp::bf16ToFloat(x[0]) == 2.0f);
  CHECK(ddp::bf16ToFloat(x[1]) == -1.5f);
  CHECK(ddp::detail::elementSize(ddp::DataType::kBFloat16) == 2);
  CHECK(ddp::detail::elementSize(ddp::DataType::kFloat32) == 4);
}
