#include "trainer/cpu_mlp.hpp"

#include <cblas.h>
#ifdef DDP_TRAINER_DNNL
#include <oneapi/dnnl/dnnl.h>
#endif

#include <algorithm>
#include <cmath>
#include <cstring>

#include "rendezvous/base/error.hpp"

namespace ddp {
namespace {

// Row-major C = A(op) · B(op) + beta · C, alpha 1: oneDNN's sgemm when built with it (its JIT
// kernels use the CPU's widest vectors), else OpenBLAS. Deterministic for a given shape, so
// every rank computes the same bits.
void gemm(bool transA, bool transB, int m, int n, int k, const float* a, int lda, const float* b,
          int ldb, float beta, float* c, int ldc) {
#ifdef DDP_TRAINER_DNNL
  if (dnnl_sgemm(transA ? 'T' : 'N', transB ? 'T' : 'N', m, n, k, 1.0f, a, lda, b, ldb, beta, c,
                 ldc) == dnnl_success) {
    return;
  }
  throw Error("oneDNN sgemm failed for a " + std::to_string(m) + "x" + std::to_string(n) + "x" +
              std::to_string(k) + " product");
#else
  cblas_sgemm(CblasRowMajor, transA ? CblasTrans : CblasNoTrans, transB ? CblasTrans : CblasNoTrans,
              m, n, k, 1.0f, a, lda, b, ldb, beta, c, ldc);
#endif
}

}  // namespace

CpuMlp::CpuMlp(MlpShape shape)
    : shape_(std::move(shape)), tensors_(mlpTensors(shape_)) {
  std::size_t n = tensors_.back().offset + tensors_.back().count;
  params_.assign(n, 0.0f);
  grads_.assign(n, 0.0f);
  acts_.resize(static_cast<std::size_t>(layers()) + 1);  // acts_[0] unused: input_ is layer 0's
}

int CpuMlp::width(int i) const {
  if (i == 0) return shape_.inputs;
  if (i == layers()) return shape_.classes;
  return shape_.hidden[static_cast<std::size_t>(i - 1)];
}

void CpuMlp::checkLabels(const int32_t* y, int batch) const {
  for (int i = 0; i < batch; ++i) {
    if (y[i] < 0 || y[i] >= shape_.classes) {
      throw ConfigError("label " + std::to_string(y[i]) + " outside [0, " +
                        std::to_string(shape_.classes) + ")");
    }
  }
}

float* CpuMlp::forward(const float* x, int batch) {
  input_ = x;  // layer 0's input is the caller's batch: no copy
  for (int l = 0; l < layers(); ++l) {
    const int in = width(l), out = width(l + 1);
    const float* w = params_.data() + tensors_[2 * l].offset;
    const float* __restrict b = params_.data() + tensors_[2 * l + 1].offset;
    auto& y = acts_[l + 1];
    y.resize(std::size_t(batch) * out);  // allocates in the first step only
    gemm(false, true, batch, out, in, layerInput(l), in, w, in, 0.0f, y.data(), out);
    // Bias (+ ReLU) in one pass over the GEMM's output, while it is still in cache.
    const bool relu = l + 1 < layers();
    for (int r = 0; r < batch; ++r) {
      float* __restrict v = y.data() + std::size_t(r) * out;
      if (relu) {
        for (int c = 0; c < out; ++c) v[c] = std::max(v[c] + b[c], 0.0f);
      } else {
        for (int c = 0; c < out; ++c) v[c] += b[c];
      }
    }
  }
  return acts_.back().data();
}

// Softmax cross-entropy: returns the summed loss; writes d(loss)/d(logits) * scale into delta.
static double softmaxXent(const float* logits, const int32_t* y, int batch, int classes,
                          float scale, float* delta) {
  double loss = 0.0;
  for (int r = 0; r < batch; ++r) {
    const float* z = logits + std::size_t(r) * classes;
    float* d = delta + std::size_t(r) * classes;
    float m = *std::max_element(z, z + classes);
    double sum = 0.0;
    for (int c = 0; c < classes; ++c) sum += std::exp(double(z[c] - m));
    double logSum = std::log(sum) + m;
    loss += logSum - z[y[r]];
    for (int c = 0; c < classes; ++c) {
      d[c] = float(std::exp(double(z[c]) - logSum)) * scale;
    }
    d[y[r]] -= scale;
  }
  return loss;
}

float CpuMlp::trainBatch(const float* x, const int32_t* y, int batch, float gradScale,
                         const GradReadyFn& onGradReady) {
  checkLabels(y, batch);
  const float* logits = forward(x, batch);
  delta_.resize(std::size_t(batch) * shape_.classes);
  double loss = softmaxXent(logits, y, batch, shape_.classes, gradScale, delta_.data());
  for (int l = layers() - 1; l >= 0; --l) {
    const int in = width(l), out = width(l + 1);
    float* gw = grads_.data() + tensors_[2 * l].offset;
    float* gb = grads_.data() + tensors_[2 * l + 1].offset;
    // dW += delta^T · input ; db += column sums of delta
    gemm(true, false, out, in, batch, delta_.data(), out, layerInput(l), in, 1.0f, gw, in);
    for (int r = 0; r < batch; ++r) {
      const float* d = &delta_[std::size_t(r) * out];
      for (int c = 0; c < out; ++c) gb[c] += d[c];
    }
    if (onGradReady) {
      onGradReady(2 * l + 1);
      onGradReady(2 * l);
    }
    if (l == 0) break;
    // delta_prev = (delta · W) * relu'(input)
    const float* w = params_.data() + tensors_[2 * l].offset;
    deltaPrev_.resize(std::size_t(batch) * in);
    gemm(false, false, batch, in, out, delta_.data(), out, w, in, 0.0f, deltaPrev_.data(), in);
    const float* a = acts_[l].data();
    float* d = deltaPrev_.data();
    const std::size_t count = deltaPrev_.size();
    for (std::size_t i = 0; i < count; ++i) d[i] = a[i] > 0.0f ? d[i] : 0.0f;  // branch-free: vectorises
    std::swap(delta_, deltaPrev_);
  }
  return float(loss / batch);
}

std::pair<float, float> CpuMlp::evaluate(const float* x, const int32_t* y, int batch) {
  checkLabels(y, batch);
  const float* logits = forward(x, batch);
  std::vector<float> scratch(std::size_t(batch) * shape_.classes);
  double loss = softmaxXent(logits, y, batch, shape_.classes, 1.0f, scratch.data());
  int correct = 0;
  for (int r = 0; r < batch; ++r) {
    const float* z = logits + std::size_t(r) * shape_.classes;
    correct += int(std::max_element(z, z + shape_.classes) - z) == y[r];
  }
  return {float(loss / batch), float(correct) / float(batch)};
}

void CpuMlp::zeroGrads() { std::fill(grads_.begin(), grads_.end(), 0.0f); }

std::shared_ptr<float> CpuMlp::allocBuffer(std::size_t count) {
  return std::shared_ptr<float>(new float[count](), std::default_delete<float[]>());
}

double CpuMlp::gradSquaredNorm() {
  return double(cblas_sdot(int(grads_.size()), grads_.data(), 1, grads_.data(), 1));
}

void CpuMlp::scaleGrads(float factor) {
  for (auto& g : grads_) g *= factor;
}

void CpuMlp::sgdUpdate(const SgdHyper& h, float* momentumBuf) {
  // __restrict and branch-free loop bodies let the compiler vectorise these.
  float* __restrict p = params_.data();
  const float* __restrict gr = grads_.data();
  float* __restrict buf = momentumBuf;
  const std::size_t n = params_.size();
  const float lr = h.lr, mu = h.momentum, wd = h.weightDecay;
  if (mu == 0.0f) {
    for (std::size_t i = 0; i < n; ++i) p[i] -= lr * (gr[i] + wd * p[i]);
  } else if (h.nesterov) {
    for (std::size_t i = 0; i < n; ++i) {
      const float g = gr[i] + wd * p[i];
      buf[i] = mu * buf[i] + g;
      p[i] -= lr * (g + mu * buf[i]);
    }
  } else {
    for (std::size_t i = 0; i < n; ++i) {
      buf[i] = mu * buf[i] + gr[i] + wd * p[i];
      p[i] -= lr * buf[i];
    }
  }
}

void CpuMlp::adamwUpdate(const AdamWHyper& h, float* __restrict m, float* __restrict v) {
  const float bc1 = 1.0f - std::pow(h.beta1, float(h.step));
  const float bc2 = 1.0f - std::pow(h.beta2, float(h.step));
  const float stepSize = h.lr / bc1, sqrtBc2 = std::sqrt(bc2), decay = 1.0f - h.lr * h.weightDecay;
  float* __restrict p = params_.data();
  const float* __restrict gr = grads_.data();
  const std::size_t n = params_.size();
  for (std::size_t i = 0; i < n; ++i) {
    const float g = gr[i];
    m[i] = h.beta1 * m[i] + (1.0f - h.beta1) * g;
    v[i] = h.beta2 * v[i] + (1.0f - h.beta2) * g * g;
    p[i] = p[i] * decay - stepSize * m[i] / (std::sqrt(v[i]) / sqrtBc2 + h.eps);
  }
}

void CpuMlp::download(const float* src, float* hostDst, std::size_t count) {
  std::memcpy(hostDst, src, count * sizeof(float));
}

void CpuMlp::upload(const float* hostSrc, float* dst, std::size_t count) {
  std::memcpy(dst, hostSrc, count * sizeof(float));
}

}  // namespace ddp
