// CRC-32C (Castagnoli), as used by TFRecord framing and by our checkpoint trailer.
//
// Thread safety: pure functions.
#pragma once

#include <cstddef>
#include <cstdint>

namespace ddp {

// CRC-32C of `size` bytes, continuing from `crc` (0 to start).
uint32_t crc32c(const void* data, std::size_t size, uint32_t crc = 0);

// TFRecord's masked CRC: ((crc >> 15) | (crc << 17)) + 0xa282ead8.
uint32_t maskedCrc32c(const void* data, std::size_t size);

}  // namespace ddp
