#include "trainer/cuda_kernels.cuh"

namespace ddp::cuda {
namespace {

constexpr int kThreads = 256;

unsigned blocksFor(std::size_t n) { return unsigned((n + kThreads - 1) / kThreads); }

__global__ void addBiasKernel(float* y, const float* b, int rows, int cols, bool relu) {
  std::size_t i = std::size_t(blockIdx.x) * blockDim.x + threadIdx.x;
  if (i >= std::size_t(rows) * cols) return;
  float v = y[i] + b[i % cols];
  y[i] = relu ? fmaxf(v, 0.0f) : v;
}

__global__ void softmaxXentKernel(const float* logits, const int32_t* labels, int rows,
                                  int classes, float scale, float* delta, float* rowLoss) {
  int r = blockIdx.x * blockDim.x + threadIdx.x;
  if (r >= rows) return;
  const float* z = logits + std::size_t(r) * classes;
  float* d = delta + std::size_t(r) * classes;
  float m = z[0];
  for (int c = 1; c < classes; ++c) m = fmaxf(m, z[c]);
  float sum = 0.0f;
  for (int c = 0; c < classes; ++c) sum += expf(z[c] - m);
  float logSum = logf(sum) + m;
  rowLoss[r] = logSum - z[labels[r]];
  for (int c = 0; c < classes; ++c) d[c] = expf(z[c] - logSum) * scale;
  d[labels[r]] -= scale;
}

__global__ void biasGradKernel(const float* delta, int rows, int cols, float* gb) {
  int c = blockIdx.x * blockDim.x + threadIdx.x;
  if (c >= cols) return;
  float s = 0.0f;
  for (int r = 0; r < rows; ++r) s += delta[std::size_t(r) * cols + c];
  gb[c] += s;
}

__global__ void reluMaskKernel(float* d, const float* act, std::size_t n) {
  std::size_t i = std::size_t(blockIdx.x) * blockDim.x + threadIdx.x;
  if (i < n && act[i] <= 0.0f) d[i] = 0.0f;
}

__global__ void toBf16Kernel(const float* in, __nv_bfloat16* out, std::size_t n) {
  std::size_t i = std::size_t(blockIdx.x) * blockDim.x + threadIdx.x;
  if (i < n) out[i] = __float2bfloat16(in[i]);
}

__global__ void sgdKernel(float* p, const float* g, float* buf, std::size_t n, float lr,
                          float momentum, float weightDecay, bool nesterov) {
  std::size_t i = std::size_t(blockIdx.x) * blockDim.x + threadIdx.x;
  if (i >= n) return;
  float grad = g[i] + weightDecay * p[i];
  if (momentum != 0.0f) {
    buf[i] = momentum * buf[i] + grad;
    grad = nesterov ? grad + momentum * buf[i] : buf[i];
  }
  p[i] -= lr * grad;
}

__global__ void adamwKernel(float* p, const float* g, float* m, float* v, std::size_t n, float lr,
                            float beta1, float beta2, float eps, float weightDecay, float bc1,
                            float bc2) {
  std::size_t i = std::size_t(blockIdx.x) * blockDim.x + threadIdx.x;
  if (i >= n) return;
  float grad = g[i];
  p[i] *= 1.0f - lr * weightDecay;
  m[i] = beta1 * m[i] + (1.0f - beta1) * grad;
  v[i] = beta2 * v[i] + (1.0f - beta2) * grad * grad;
  p[i] -= (lr / bc1) * m[i] / (sqrtf(v[i]) / sqrtf(bc2) + eps);
}

}  // namespace

void addBias(float* y, const float* b, int rows, int cols, bool relu, cudaStream_t stream) {
  addBiasKernel<<<blocksFor(std::size_t(rows) * cols), kThreads, 0, stream>>>(y, b, rows, cols, relu);
}

void softmaxXent(const float* logits, const int32_t* labels, int rows, int classes, float scale,
                 float* delta, float* rowLoss, cudaStream_t stream) {
  softmaxXentKernel<<<blocksFor(rows), kThreads, 0, stream>>>(logits, labels, rows, classes, scale,
                                                              delta, rowLoss);
}

void biasGrad(const float* delta, int rows, int cols, float* gb, cudaStream_t stream) {
  biasGradKernel<<<blocksFor(cols), kThreads, 0, stream>>>(delta, rows, cols, gb);
}

void reluMask(float* d, const float* act, std::size_t n, cudaStream_t stream) {
  reluMaskKernel<<<blocksFor(n), kThreads, 0, stream>>>(d, act, n);
}

void toBf16(const float* in, __nv_bfloat16* out, std::size_t n, cudaStream_t stream) {
  toBf16Kernel<<<blocksFor(n), kThreads, 0, stream>>>(in, out, n);
}

void sgdUpdate(float* p, const float* g, float* buf, std::size_t n, float lr, float momentum,
               float weightDecay, bool nesterov, cudaStream_t stream) {
  sgdKernel<<<blocksFor(n), kThreads, 0, stream>>>(p, g, buf, n, lr, momentum, weightDecay, nesterov);
}

void adamwUpdate(float* p, const float* g, float* m, float* v, std::size_t n, float lr,
                 float beta1, float beta2, float eps, float weightDecay, float bc1, float bc2,
                 cudaStream_t stream) {
  adamwKernel<<<blocksFor(n), kThreads, 0, stream>>>(p, g, m, v, n, lr, beta1, beta2, eps,
                                                     weightDecay, bc1, bc2);
}

}  // namespace ddp::cuda
