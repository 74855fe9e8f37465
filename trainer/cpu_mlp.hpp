// CpuMlp: the Model on the host, GEMMs through oneDNN's sgemm (builds with libdnnl-dev) or
// OpenBLAS (cblas_sgemm), everything in fp32.
//
// Thread safety: see Model. The GEMM library may use its own threads inside a GEMM (oneDNN:
// OMP_NUM_THREADS; OpenBLAS: OPENBLAS_NUM_THREADS / OMP_NUM_THREADS); the launcher sets
// OMP_NUM_THREADS=1 when several workers share a node.
#pragma once

#include <vector>

#include "trainer/model.hpp"

namespace ddp {

class CpuMlp final : public Model {
 public:
  explicit CpuMlp(MlpShape shape);

  const MlpShape& shape() const override { return shape_; }
  const std::vector<TensorRange>& tensors() const override { return tensors_; }
  std::size_t numParams() const override { return params_.size(); }
  bool onDevice() const override { return false; }
  float* params() override { return params_.data(); }
  float* grads() override { return grads_.data(); }

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

 private:
  int layers() const { return static_cast<int>(shape_.hidden.size()) + 1; }
  int width(int i) const;  // width(0) = inputs, width(layers()) = classes
  // Runs the forward pass; layerInput(l) is layer l's input, returns the logits buffer.
  float* forward(const float* x, int batch);
  const float* layerInput(int l) const { return l == 0 ? input_ : acts_[std::size_t(l)].data(); }
  void checkLabels(const int32_t* y, int batch) const;

  MlpShape shape_;
  std::vector<TensorRange> tensors_;
  std::vector<float> params_, grads_;
  std::vector<std::vector<float>> acts_;  // acts_[l] (l >= 1) = ReLU output, last = logits
  const float* input_ = nullptr;          // the batch of the current trainBatch/evaluate call
  std::vector<float> delta_, deltaPrev_;
};

}  // namespace ddp
