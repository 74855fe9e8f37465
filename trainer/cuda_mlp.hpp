// CudaMlp: the Model on one CUDA device — cuBLAS GEMMs plus the kernels of cuda_kernels.cuh.
//
// Parameters, gradients and optimizer state are fp32 device buffers (the master weights). With
// bf16 autocast every GEMM casts its two inputs to bf16 and runs cublasGemmEx with fp32
// accumulation and an fp32 output (CUBLAS_COMPUTE_32F), like torch.autocast(dtype=bfloat16) for
// Linear layers; bias, ReLU, softmax cross-entropy and the optimizer stay fp32.
//
// Streams: all compute runs on one stream. gradsReadyToken() records an event after the
// announced gradients; the reducer's communication thread makes its own stream (commStream())
// wait for that event before the NCCL allreduce, so communication overlaps later backward work.
//
// Built into the module libddp_train_cuda.so, which train loads on demand (cuda_module.hpp).
//
// Thread safety: see Model. commStream()/waitForGrads() are called from the communication thread.
#pragma once

#include <memory>
#include <vector>

#include "trainer/model.hpp"

namespace ddp {

class CudaMlp final : public Model {
 public:
  // Uses device `deviceIndex % cudaDeviceCount()`. Throws ddp::Error when CUDA or cuBLAS fail.
  CudaMlp(MlpShape shape, int deviceIndex, bool bf16);
  ~CudaMlp() override;

  const MlpShape& shape() const override { return shape_; }
  const std::vector<TensorRange>& tensors() const override { return tensors_; }
  std::size_t numParams() const override { return numParams_; }
  bool onDevice() const override { return true; }
  float* params() override { return params_.get(); }
  float* grads() override { return grads_.get(); }

  float trainBatch(const float* x, const int32_t* y, int batch, float gradScale,
                   const GradReadyFn& onGradReady) override;
  std::pair<float, float> evaluate(const float* x, const int32_t* y, int batch) override;

  void zeroGrads() override;
  std::shared_ptr<float> allocBuffer(std::size_t count) override;
  double gradSquaredNorm() override;
  void scaleGrads(float factor) override;
  void sgdUpdate(const SgdHyper& h, float* momentumBuf) override;
  void adamwUpdate(const AdamWHyper& h, float* m, float* v) override;
  void download(const float* src, float* hostDst, std::size_t count) override;
  void upload(const float* hostSrc, float* dst, std::size_t count) override;

  void* gradsReadyToken() override;
  void waitForGrads(void* token) override;
  void* commStream() override;
  void synchronize() override;

 private:
  struct Impl;
  int layers() const { return static_cast<int>(shape_.hidden.size()) + 1; }
  int width(int i) const;
  float* forward(const float* x, const int32_t* y, int batch);
  // C = op(A) op(B) (+ C when accumulate), column-major cuBLAS view; bf16 inputs when enabled.
  void gemm(bool transA, bool transB, int m, int n, int k, const float* a, int lda, const float* b,
            int ldb, float* c, int ldc, bool accumulate);
  void checkLabels(const int32_t* y, int batch) const;

  MlpShape shape_;
  std::vector<TensorRange> tensors_;
  std::size_t numParams_ = 0;
  int device_ = 0;
  bool bf16_ = false;
  std::unique_ptr<Impl> impl_;
  std::shared_ptr<float> params_, grads_;
};

}  // namespace ddp
