// prepareTrainer (trainer.hpp): what a CPU rank builds while its communicator connects.
#include <algorithm>
#include <exception>
#include <future>
#include <vector>

#include "rendezvous/base/error.hpp"
#include "trainer/detail/train_loop.hpp"

namespace ddp {

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
  const std::size_t n = std::min<std::size_t>(std::size_t(config.batchSize), p->data->size());
  if (n > 0) {
    std::vector<int64_t> ids(n);
    for (std::size_t i = 0; i < n; ++i) ids[i] = int64_t(i);
    std::vector<float> x(n * p->data->features());
    std::vector<int32_t> y(n);
    p->data->gather(ids, x.data(), y.data());
    p->warmUp = std::async(std::launch::async, [model = makeModel(config.device, p->shape, 0, false),
                                                x = std::move(x), y = std::move(y), n] {
      try {
        model->trainBatch(x.data(), y.data(), int(n), 1.0f, GradReadyFn{});
      } catch (const std::exception&) {
      }
    });
  }
  return p;
}

void awaitWarmUp(PreparedTrainer& prepared) {
  if (prepared.warmUp.valid()) prepared.warmUp.wait();
}

}  // namespace ddp
