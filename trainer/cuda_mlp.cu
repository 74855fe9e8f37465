#include "trainer/cuda_mlp.hpp"

#include <cublas_v2.h>
#include <cuda_bf16.h>
#include <cuda_runtime.h>

#include <cmath>
#include <string>

#include "rendezvous/base/error.hpp"
#include "trainer/cuda_kernels.cuh"
#include "trainer/cuda_devices.hpp"

namespace ddp {
namespace {

void check(cudaError_t e, const char* what) {
  if (e != cudaSuccess) throw Error(std::string("CUDA: ") + what + ": " + cudaGetErrorString(e));
}

void check(cublasStatus_t s, const char* what) {
  if (s != CUBLAS_STATUS_SUCCESS) {
    throw Error(std::string("cuBLAS: ") + what + " failed with status " + std::to_string(int(s)));
  }
}

template <typename T>
std::shared_ptr<T> deviceAlloc(std::size_t count) {
  void* p = nullptr;
  check(cudaMalloc(&p, std::max<std::size_t>(1, count) * sizeof(T)), "cudaMalloc");
  check(cudaMemset(p, 0, std::max<std::size_t>(1, count) * sizeof(T)), "cudaMemset");
  return std::shared_ptr<T>(static_cast<T*>(p), [](T* q) { cudaFree(q); });
}

// A growable device buffer.
template <typename T>
struct Scratch {
  std::shared_ptr<T> ptr;
  std::size_t size = 0;
  T* get(std::size_t n) {
    if (n > size) {
      ptr = deviceAlloc<T>(n);
      size = n;
    }
    return ptr.get();
  }
};

}  // namespace

struct CudaMlp::Impl {
  cudaStream_t stream = nullptr, comm = nullptr;
  cublasHandle_t blas = nullptr;
  std::vector<cudaEvent_t> events;  // ring of readiness events, one per tensor
  std::size_t nextEvent = 0;
  std::vector<Scratch<float>> acts;  // acts[l]: layer l input (acts[0] = x), last = logits
  Scratch<float> delta, deltaPrev, rowLoss;
  Scratch<int32_t> labels;
  Scratch<__nv_bfloat16> castA, castB;
};

CudaMlp::CudaMlp(MlpShape shape, int deviceIndex, bool bf16)
    : shape_(std::move(shape)), tensors_(mlpTensors(shape_)), bf16_(bf16), impl_(new Impl) {
  int count = cudaDeviceCount();
  if (count == 0) throw ConfigError("model: device \"cuda\" requested but no CUDA device is visible");
  device_ = deviceIndex % count;
  check(cudaSetDevice(device_), "cudaSetDevice");
  numParams_ = tensors_.back().offset + tensors_.back().count;
  params_ = deviceAlloc<float>(numParams_);
  grads_ = deviceAlloc<float>(numParams_);
  check(cudaStreamCreate(&impl_->stream), "cudaStreamCreate");
  check(cudaStreamCreateWithFlags(&impl_->comm, cudaStreamNonBlocking), "cudaStreamCreate");
  check(cublasCreate(&impl_->blas), "cublasCreate");
  check(cublasSetStream(impl_->blas, impl_->stream), "cublasSetStream");
  impl_->events.resize(tensors_.size());
  for (auto& e : impl_->events) check(cudaEventCreateWithFlags(&e, cudaEventDisableTiming), "cudaEventCreate");
  impl_->acts.resize(std::size_t(layers()) + 1);
}

CudaMlp::~CudaMlp() {
  cudaSetDevice(device_);
  cudaStreamSynchronize(impl_->stream);
  for (auto& e : impl_->events) cudaEventDestroy(e);
  cublasDestroy(impl_->blas);
  cudaStreamDestroy(impl_->comm);
  cudaStreamDestroy(impl_->stream);
}

int CudaMlp::width(int i) const {
  if (i == 0) return shape_.inputs;
  if (i == layers()) return shape_.classes;
  return shape_.hidden[std::size_t(i - 1)];
}

void CudaMlp::checkLabels(const int32_t* y, int batch) const {
  for (int i = 0; i < batch; ++i) {
    if (y[i] < 0 || y[i] >= shape_.classes) {
      throw ConfigError("label " + std::to_string(y[i]) + " outside [0, " +
                        std::to_string(shape_.classes) + ")");
    }
  }
}

void CudaMlp::gemm(bool transA, bool transB, int m, int n, int k, const float* a, int lda,
                   const float* b, int ldb, float* c, int ldc, bool accumulate) {
  const float one = 1.0f, beta = accumulate ? 1.0f : 0.0f;
  auto opA = transA ? CUBLAS_OP_T : CUBLAS_OP_N, opB = transB ? CUBLAS_OP_T : CUBLAS_OP_N;
  if (!bf16_) {
    check(cublasSgemm(impl_->blas, opA, opB, m, n, k, &one, a, lda, b, ldb, &beta, c, ldc), "sgemm");
    return;
  }
  const std::size_t sizeA = std::size_t(transA ? m : k) * lda, sizeB = std::size_t(transB ? k : n) * ldb;
  auto* a16 = impl_->castA.get(sizeA);
  auto* b16 = impl_->castB.get(sizeB);
  cuda::toBf16(a, a16, sizeA, impl_->stream);
  cuda::toBf16(b, b16, sizeB, impl_->stream);
  check(cublasGemmEx(impl_->blas, opA, opB, m, n, k, &one, a16, CUDA_R_16BF, lda, b16, CUDA_R_16BF,
                     ldb, &beta, c, CUDA_R_32F, ldc, CUBLAS_COMPUTE_32F, CUBLAS_GEMM_DEFAULT),
        "gemmEx(bf16)");
}

float* CudaMlp::forward(const float* x, const int32_t* y, int batch) {
  checkLabels(y, batch);
  cudaStream_t s = impl_->stream;
  float* in = impl_->acts[0].get(std::size_t(batch) * shape_.inputs);
  check(cudaMemcpyAsync(in, x, std::size_t(batch) * shape_.inputs * 4, cudaMemcpyHostToDevice, s), "copy x");
  check(cudaMemcpyAsync(impl_->labels.get(batch), y, std::size_t(batch) * 4, cudaMemcpyHostToDevice, s),
        "copy y");
  for (int l = 0; l < layers(); ++l) {
    const int fanIn = width(l), out = width(l + 1);
    float* yl = impl_->acts[std::size_t(l) + 1].get(std::size_t(batch) * out);
    // Row-major Y[B,out] = X[B,in] W^T  <=>  column-major Y^T = W^T^T X^T.
    gemm(true, false, out, batch, fanIn, params_.get() + tensors_[2 * l].offset, fanIn,
         impl_->acts[std::size_t(l)].ptr.get(), fanIn, yl, out, false);
    cuda::addBias(yl, params_.get() + tensors_[2 * l + 1].offset, batch, out, l + 1 < layers(), s);
  }
  return impl_->acts.back().ptr.get();
}

float CudaMlp::trainBatch(const float* x, const int32_t* y, int batch, float gradScale,
                          const GradReadyFn& onGradReady) {
  check(cudaSetDevice(device_), "cudaSetDevice");
  cudaStream_t s = impl_->stream;
  const float* logits = forward(x, y, batch);
  float* delta = impl_->delta.get(std::size_t(batch) * shape_.classes);
  float* rowLoss = impl_->rowLoss.get(batch);
  cuda::softmaxXent(logits, impl_->labels.ptr.get(), batch, shape_.classes, gradScale, delta, rowLoss, s);
  for (int l = layers() - 1; l >= 0; --l) {
    const int fanIn = width(l), out = width(l + 1);
    const float* input = impl_->acts[std::size_t(l)].ptr.get();
    // dW[out,in] += delta^T X  <=>  column-major dW^T = X^T delta.
    gemm(false, true, fanIn, out, batch, input, fanIn, delta, out,
         grads_.get() + tensors_[2 * l].offset, fanIn, true);
    cuda::biasGrad(delta, batch, out, grads_.get() + tensors_[2 * l + 1].offset, s);
    if (onGradReady) {
      onGradReady(2 * l + 1);
      onGradReady(2 * l);
    }
    if (l == 0) break;
    float* prev = impl_->deltaPrev.get(std::size_t(batch) * fanIn);
    // dX[B,in] = delta[B,out] W[out,in]  <=>  column-major dX^T = W^T delta^T.
    gemm(false, false, fanIn, batch, out, params_.get() + tensors_[2 * l].offset, fanIn, delta, out,
         prev, fanIn, false);
    cuda::reluMask(prev, input, std::size_t(batch) * fanIn, s);
    std::swap(impl_->delta, impl_->deltaPrev);
    delta = impl_->delta.ptr.get();
  }
  std::vector<float> losses(static_cast<std::size_t>(batch));
  check(cudaMemcpyAsync(losses.data(), rowLoss, losses.size() * 4, cudaMemcpyDeviceToHost, s), "copy loss");
  check(cudaStreamSynchronize(s), "train step");
  double sum = 0;
  for (float v : losses) sum += v;
  return float(sum / batch);
}

std::pair<float, float> CudaMlp::evaluate(const float* x, const int32_t* y, int batch) {
  check(cudaSetDevice(device_), "cudaSetDevice");
  const float* logits = forward(x, y, batch);
  std::vector<float> host(std::size_t(batch) * shape_.classes);
  check(cudaMemcpyAsync(host.data(), logits, host.size() * 4, cudaMemcpyDeviceToHost, impl_->stream),
        "copy logits");
  check(cudaStreamSynchronize(impl_->stream), "evaluate");
  double loss = 0;
  int correct = 0;
  for (int r = 0; r < batch; ++r) {
    const float* z = host.data() + std::size_t(r) * shape_.classes;
    float m = z[0];
    int best = 0;
    for (int c = 1; c < shape_.classes; ++c) {
      if (z[c] > m) m = z[c], best = c;
    }
    double sum = 0;
    for (int c = 0; c < shape_.classes; ++c) sum += std::exp(double(z[c] - m));
    loss += std::log(sum) + m - z[y[r]];
    correct += best == y[r];
  }
  return {float(loss / batch), float(correct) / float(batch)};
}

void CudaMlp::zeroGrads() {
  check(cudaMemsetAsync(grads_.get(), 0, numParams_ * 4, impl_->stream), "zero grads");
}

std::shared_ptr<float> CudaMlp::allocBuffer(std::size_t count) {
  check(cudaSetDevice(device_), "cudaSetDevice");
  return deviceAlloc<float>(count);
}

double CudaMlp::gradSquaredNorm() {
  float norm = 0;
  check(cublasSnrm2(impl_->blas, int(numParams_), grads_.get(), 1, &norm), "snrm2");
  return double(norm) * norm;
}

void CudaMlp::scaleGrads(float factor) {
  check(cublasSscal(impl_->blas, int(numParams_), &factor, grads_.get(), 1), "sscal");
}

void CudaMlp::sgdUpdate(const SgdHyper& h, float* buf) {
  cuda::sgdUpdate(params_.get(), grads_.get(), buf, numParams_, h.lr, h.momentum, h.weightDecay,
                  h.nesterov, impl_->stream);
}

void CudaMlp::adamwUpdate(const AdamWHyper& h, float* m, float* v) {
  const float bc1 = 1.0f - std::pow(h.beta1, float(h.step));
  const float bc2 = 1.0f - std::pow(h.beta2, float(h.step));
  cuda::adamwUpdate(params_.get(), grads_.get(), m, v, numParams_, h.lr, h.beta1, h.beta2, h.eps,
                    h.weightDecay, bc1, bc2, impl_->stream);
}

void CudaMlp::download(const float* src, float* hostDst, std::size_t count) {
  check(cudaMemcpyAsync(hostDst, src, count * 4, cudaMemcpyDeviceToHost, impl_->stream), "download");
  check(cudaStreamSynchronize(impl_->stream), "download");
}

void CudaMlp::upload(const float* hostSrc, float* dst, std::size_t count) {
  check(cudaMemcpyAsync(dst, hostSrc, count * 4, cudaMemcpyHostToDevice, impl_->stream), "upload");
  check(cudaStreamSynchronize(impl_->stream), "upload");
}

void* CudaMlp::gradsReadyToken() {
  cudaEvent_t e = impl_->events[impl_->nextEvent++ % impl_->events.size()];
  check(cudaEventRecord(e, impl_->stream), "cudaEventRecord");
  return e;
}

void CudaMlp::waitForGrads(void* token) {
  check(cudaSetDevice(device_), "cudaSetDevice");
  check(cudaStreamWaitEvent(impl_->comm, static_cast<cudaEvent_t>(token), 0), "cudaStreamWaitEvent");
}

void* CudaMlp::commStream() {
  check(cudaSetDevice(device_), "cudaSetDevice");
  return impl_->comm;
}

void CudaMlp::synchronize() { check(cudaStreamSynchronize(impl_->stream), "synchronize"); }

}  // namespace ddp

// The module's entry (cuda_module.hpp): train loads this module, and so cuBLAS, only for a model
// on a CUDA device.
extern "C" __attribute__((visibility("default"))) ddp::Model* ddp_train_cuda_make_mlp(
    const ddp::MlpShape* shape, int deviceIndex, bool bf16) {
  return new ddp::CudaMlp(*shape, deviceIndex, bf16);
}
