// Model: an MLP classifier (Linear-ReLU-…-Linear, softmax cross-entropy) whose parameters and
// gradients live in one flat fp32 buffer each, on the host (CpuMlp) or on a CUDA device (CudaMlp).
//
// Parameter layout: layers in forward order, each as weight [out x in] (row-major) then bias
// [out]. Tensor t (0-based: 2*layer for a weight, 2*layer+1 for a bias) is the element range
// tensors()[t]. Backward produces gradients last layer first and announces each finished tensor
// through the callback, which is what lets the DDP reducer start a bucket's allreduce early.
//
// The flat-buffer maths the optimizer and the reducer need (norms, scaling, SGD and AdamW
// updates) is done by the model as well, so the same training loop drives either device.
//
// Thread safety: not thread-safe; one training thread owns a model. The reducer's communication
// thread only touches gradient ranges that backward has announced as finished.
#pragma once

#include <cstddef>
#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <vector>

namespace ddp {

struct TensorRange {
  std::size_t offset = 0;  // first element in the flat buffer
  std::size_t count = 0;   // elements
};

struct MlpShape {
  int inputs = 0;               // features
  std::vector<int> hidden;      // hidden layer widths
  int classes = 0;              // outputs
};

struct SgdHyper {
  float lr = 0.1f, momentum = 0.0f, weightDecay = 0.0f;
  bool nesterov = false;
};

struct AdamWHyper {
  float lr = 1e-3f, beta1 = 0.9f, beta2 = 0.999f, eps = 1e-8f, weightDecay = 0.01f;
  int64_t step = 1;  // 1-based step for bias correction
};

// Called by backward with the index of a tensor whose gradient is final.
using GradReadyFn = std::function<void(int tensor)>;

class Model {
 public:
  virtual ~Model() = default;

  virtual const MlpShape& shape() const = 0;
  virtual const std::vector<TensorRange>& tensors() const = 0;
  virtual std::size_t numParams() const = 0;
  virtual bool onDevice() const = 0;  // true: the flat buffers are CUDA device memory

  virtual float* params() = 0;  // flat parameters (host or device memory)
  virtual float* grads() = 0;   // flat gradients, same layout

  // Forward + loss + backward on one batch (x: batch*inputs floats, y: batch labels, host memory).
  // Gradients of `gradScale * sum over samples of loss` are ADDED to grads() (so micro-steps
  // accumulate); pass gradScale = 1/(batch*world*accum) for a DDP mean. Returns the mean loss of
  // the batch. Throws ConfigError for a label outside [0, classes).
  virtual float trainBatch(const float* x, const int32_t* y, int batch, float gradScale,
                           const GradReadyFn& onGradReady) = 0;
  // Mean loss and accuracy on a batch, no gradients.
  virtual std::pair<float, float> evaluate(const float* x, const int32_t* y, int batch) = 0;

  virtual void zeroGrads() = 0;
  // Allocates a zeroed buffer of `count` floats in the model's memory kind (host or device):
  // optimizer state, communication scratch.
  virtual std::shared_ptr<float> allocBuffer(std::size_t count) = 0;
  virtual double gradSquaredNorm() = 0;
  virtual void scaleGrads(float factor) = 0;
  virtual void sgdUpdate(const SgdHyper& h, float* momentumBuf) = 0;
  virtual void adamwUpdate(const AdamWHyper& h, float* m, float* v) = 0;

  // Host <-> model copies of a flat buffer (params or optimizer state).
  virtual void download(const float* src, float* hostDst, std::size_t count) = 0;
  virtual void upload(const float* hostSrc, float* dst, std::size_t count) = 0;

  // Orders communication after the compute that produced the announced gradients. CPU: nothing
  // to do (backward writes synchronously). CUDA: records an event on the compute stream; the
  // communication thread then calls waitForGrads(token) before its collective.
  virtual void* gradsReadyToken() { return nullptr; }
  virtual void waitForGrads(void* /*token*/) {}
  // The stream a communicator should use (CUDA), or nullptr.
  virtual void* commStream() { return nullptr; }
  // Waits until all queued work is done (CUDA); no-op on CPU.
  virtual void synchronize() {}
};

// Layout of an MLP's tensors for `shape`.
std::vector<TensorRange> mlpTensors(const MlpShape& shape);

// PyTorch nn.Linear's default init (kaiming_uniform_(a=sqrt(5)) => U(-1/sqrt(fan_in),
// 1/sqrt(fan_in)) for weight and bias), drawn from mt19937_64(seed) in tensor order, into a host
// buffer of numParams floats. Same seed => same parameters on every rank.
std::vector<float> initMlpParams(const MlpShape& shape, uint64_t seed);

// Where a model runs. kAuto is a configuration's "auto", resolved (train_config.hpp:
// resolveDeviceAndBackend) before a model is made.
enum class TrainDevice { kAuto, kCpu, kCuda };

// True when this build has CUDA support and at least one device is visible.
bool cudaDevicesPresent();

// A model on `device` (resolved: cpu or cuda). Throws ConfigError for kAuto (resolve it first:
// resolveDeviceAndBackend), cuda in a build without CUDA, or bf16 on cpu.
std::unique_ptr<Model> makeModel(TrainDevice device, const MlpShape& shape, int deviceIndex,
                                 bool bf16);

}  // namespace ddp
