// Small CUDA kernels of the CudaMlp: bias + ReLU, softmax cross-entropy, bias gradient, ReLU
// mask, fp32 -> bf16 casts and the SGD / AdamW updates. Each launcher queues work on `stream` and
// returns without waiting.
//
// Thread safety: stateless launchers.
#pragma once

#include <cstddef>
#include <cstdint>

#include <cuda_bf16.h>
#include <cuda_runtime.h>

namespace ddp::cuda {

// y[r][c] += b[c], then ReLU when relu is set. y is rows x cols row-major.
void addBias(float* y, const float* b, int rows, int cols, bool relu, cudaStream_t stream);
// delta = scale * (softmax(logits) - onehot(labels)); rowLoss[r] = -log softmax(logits)[r][label].
void softmaxXent(const float* logits, const int32_t* labels, int rows, int classes, float scale,
                 float* delta, float* rowLoss, cudaStream_t stream);
// gb[c] += sum over rows of delta[r][c].
void biasGrad(const float* delta, int rows, int cols, float* gb, cudaStream_t stream);
// d[i] = act[i] > 0 ? d[i] : 0.
void reluMask(float* d, const float* act, std::size_t n, cudaStream_t stream);
// out[i] = bf16(in[i]).
void toBf16(const float* in, __nv_bfloat16* out, std::size_t n, cudaStream_t stream);
void sgdUpdate(float* p, const float* g, float* buf, std::size_t n, float lr, float momentum,
               float weightDecay, bool nesterov, cudaStream_t stream);
void adamwUpdate(float* p, const float* g, float* m, float* v, std::size_t n, float lr,
                 float beta1, float beta2, float eps, float weightDecay, float bc1, float bc2,
                 cudaStream_t stream);

}  // namespace ddp::cuda
