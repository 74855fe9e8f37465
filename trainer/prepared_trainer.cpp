// prepareTrainer (trainer.hpp): what a CPU rank builds while its communicator connects.
#include <algorithm>
#include <exception>
#include <future>
#include <vector>

#include "rendezvous/base/error.hpp"
#include "trainer/detail/train_loop.hpp"

namespace ddp {

namespace {

// The first rows of the data, as many as a batch: what a warm-up trains on.
struct WarmUpBatch {
  std::size_t rows = 0;
  std::vector<float> x;
  std::vector<int32_t> y;
};

WarmUpBatch warmUpBatch(const ShardedDataset& data, const TrainConfig& config) {
  WarmUpBatch b;
  b.rows = std::min<std::size_t>(std::size_t(config.batchSize), data.size());
  std::vector<int64_t> ids(b.rows);
  for (std::size_t i = 0; i < b.rows; ++i) ids[i] = int64_t(i);
  b.x.resize(b.rows * data.features());
  b.y.resize(b.rows);
  if (b.rows > 0) data.gather(ids, b.x.data(), b.y.data());
  return b;
}

}  // namespace

std::shared_ptr<PreparedTrainer> prepareTrainer(const TrainConfig& config) {
  if (config.device != TrainDevice::kCpu) {
    throw ConfigError("trainer: only a CPU model is prepared ahead of train()");
  }
  auto p = std::make_shared<PreparedTrainer>();
  p->data = std::make_unique<ShardedDataset>(config.data);
  p->shape = {int(p->data->features()), config.hidden, int(p->data->classes())};
  p->model = makeModel(config.device, p->shape, 0, config.bf16);
  p->optimizer = std::make_unique<Optimizer>(*p->model, config.optimizer, 1);
  // One forward and backward of a batch as large as the run's, on a throwaway model of the same
  // shape and on a thread of its own: the GEMM library builds its kernels (for every model of the
  // process) while the model itself meets its peers and may take one's state. Its errors are the
  // first step's, which reports them.
  WarmUpBatch batch = warmUpBatch(*p->data, config);
  if (batch.rows > 0) {
    p->warmUp = std::async(std::launch::async, [model = makeModel(config.device, p->shape, 0, false),
                                                b = std::move(batch)] {
      try {
        model->trainBatch(b.x.data(), b.y.data(), int(b.rows), 1.0f, GradReadyFn{});
      } catch (const std::exception&) {
      }
    });
  }
  return p;
}

void warmUpStandby(PreparedTrainer& prepared, const TrainConfig& config) {
  if (prepared.warmUp.valid()) prepared.warmUp.wait();
  // On a VM a page's first write costs microseconds: ~5 ms of a replacement's first step went to
  // the activations and gradients it wrote for the first time.
  try {
    const WarmUpBatch b = warmUpBatch(*prepared.data, config);
    if (b.rows > 0) {
      prepared.model->trainBatch(b.x.data(), b.y.data(), int(b.rows), 1.0f, GradReadyFn{});
    }
  } catch (const std::exception&) {
  }
  prepared.model->zeroGrads();
}

}  // namespace ddp
