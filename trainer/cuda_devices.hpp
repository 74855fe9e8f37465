// cudaDeviceCount: how many CUDA devices this process sees, through the CUDA runtime only (cheap
// to load, unlike cuBLAS: cuda_module.hpp). Inline, so that train and the CUDA model module each
// have it without needing a symbol of the other.
//
// Thread safety: as the CUDA runtime (thread-safe).
#pragma once

#include <cuda_runtime.h>

namespace ddp {

// Visible CUDA devices; 0 when there is no driver or no device (the sticky error is cleared).
// Never throws.
inline int cudaDeviceCount() {
  int n = 0;
  if (cudaGetDeviceCount(&n) != cudaSuccess) {
    cudaGetLastError();
    return 0;
  }
  return n;
}

}  // namespace ddp
