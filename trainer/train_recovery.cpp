// Recovery in place (docs/recovery.md): when a collective fails or the agent publishes a new
// quorum, this rank keeps its process, model and data; it joins the newest quorum (ElasticGroup),
// agrees with its peers on whose state to continue from and takes that state if its own differs.
// The interrupted step is redone from the agreed state.
#include <cstring>

#include "rendezvous/base/error.hpp"
#include "rendezvous/base/logging.hpp"
#include "trainer/crc32c.hpp"
#include "trainer/detail/train_loop.hpp"
#include "worker_runtime/elastic_group.hpp"

namespace ddp::detail {
namespace {

// TrainState as it travels in a broadcast (native layout: every rank runs this binary).
struct StateWords {
  int64_t epoch, step, consumed, shardBase;
  int64_t shardWorld, worldSize, generation;
  uint64_t samplerSeed, initSeed;
};

StateWords wordsOf(const TrainState& s) {
  return {s.epoch,          s.step,         s.consumed,        s.shardBase, s.shardWorld,
          s.worldSize,      s.generation,   s.samplerSeed,     s.initSeed};
}

TrainState stateOf(const StateWords& w) {
  TrainState s;
  s.epoch = w.epoch;
  s.step = w.step;
  s.consumed = w.consumed;
  s.shardBase = w.shardBase;
  s.shardWorld = int(w.shardWorld);
  s.worldSize = int(w.worldSize);
  s.generation = int(w.generation);
  s.samplerSeed = w.samplerSeed;
  s.initSeed = w.initSeed;
  return s;
}

std::string rankList(const std::vector<int>& ranks) {
  std::string out;
  for (int r : ranks) out += (out.empty() ? "" : ", ") + std::to_string(r);
  return out;
}

}  // namespace

bool TrainLoop::recoversInPlace() const { return group_ != nullptr && group_->recoversInPlace(); }

void TrainLoop::recover(const std::string& why) {
  const auto budget = std::chrono::milliseconds(int64_t(cfg_.commTimeoutS * 1000));
  logger("trainer")->info("rank {} at step {}: {}; recovering in place", ctx_.rank, state_.step,
                          why);
  while (true) {
    reducer_.reset();    // joins its communication thread
    gradComm_.reset();   // leaves the shared-memory segment: a peer waiting in it fails now
    model_->zeroGrads();  // the interrupted step is redone from the agreed state
    group_->rebuild(budget);  // CommError when no quorum comes: the worker exits
    adoptQuorum();
    try {
      if (comm_) syncState();
      setUpCollectives();
      break;
    } catch (const StateLost&) {
      throw;
    } catch (const CommError& e) {
      // A peer failed during the recovery itself (the donor died mid-broadcast, ...): its agent
      // publishes the next quorum.
      logger("trainer")->warn("rank {}: recovery into quorum {} failed ({}); waiting for the next",
                              ctx_.rank, toString(group_->view().id), e.what());
    }
  }
  ++result_.recoveries;
}

void TrainLoop::adoptQuorum() {
  const GroupView& v = group_->view();
  ctx_.rank = v.rank;
  ctx_.worldSize = v.worldSize;
  ctx_.localWorldSize = v.localWorldSize;
  ctx_.generation = int(v.id.generation);
  comm_ = v.worldSize > 1 ? &group_->comm() : nullptr;
  optimizer_->setWorldSize(v.worldSize);
  setUpSampler();
  if (ctx_.rank != 0) {
    metrics_.reset();
  } else if (!metrics_) {
    metrics_ = std::make_unique<MetricsSink>(cfg_.metrics, cfg_.tensorboardDir, cfg_.progressSeconds);
    if (ctx_.publishPoint) metrics_->publishTo(ctx_.publishPoint);
  }
}

StateDigest TrainLoop::digest() {
  // A replacement process has no state worth keeping until a peer gave it one.
  if (!hasState_) return {-1, 0};
  std::vector<float> host(model_->numParams());
  model_->synchronize();
  model_->download(model_->params(), host.data(), host.size());
  uint32_t a = crc32c(host.data(), host.size() * sizeof(float));
  uint32_t b = 0;
  for (const auto& buffer : optimizer_->saveState()) {
    b = crc32c(buffer.data(), buffer.size() * sizeof(float), b);
  }
  const StateWords words = wordsOf(state_);
  b = crc32c(&words, sizeof words, b);
  return {state_.step, (uint64_t(a) << 32) | b};
}

void TrainLoop::broadcastHost(std::vector<float>& values, int root) {
  if (values.empty()) return;
  auto buffer = model_->allocBuffer(values.size());
  model_->upload(values.data(), buffer.get(), values.size());
  model_->synchronize();
  comm_->broadcast(buffer.get(), values.size() * sizeof(float), root);
  model_->download(buffer.get(), values.data(), values.size());
}

void TrainLoop::syncState() {
  const int world = ctx_.worldSize;
  const auto packed = packDigest(digest());
  std::vector<float> all(kDigestFloats * std::size_t(world));
  auto buffer = model_->allocBuffer(all.size());
  model_->upload(packed.data(), buffer.get() + kDigestFloats * std::size_t(ctx_.rank), kDigestFloats);
  model_->synchronize();
  comm_->allgather(buffer.get() + kDigestFloats * std::size_t(ctx_.rank), buffer.get(), kDigestFloats,
                   DataType::kFloat32);
  model_->download(buffer.get(), all.data(), all.size());
  std::vector<StateDigest> digests;
  for (int r = 0; r < world; ++r) digests.push_back(unpackDigest(all.data() + kDigestFloats * r));
  const StateAgreement agreed = agreeOnState(digests);
  if (agreed.state.step < 0) {
    // Every rank is new: the job's state went with the processes that held it.
    group_->markStateLost();
    throw StateLost("quorum " + toString(group_->view().id) + ": no rank holds the training "
                    "state (every process is new); recovery in place is impossible");
  }
  if (agreed.differ.empty()) return;
  if (ctx_.rank == agreed.donor) {
    logger("trainer")->info("rank {} hands its state (step {}) to rank(s) {}", ctx_.rank,
                            agreed.state.step, rankList(agreed.differ));
  }
  comm_->broadcast(model_->params(), model_->numParams() * sizeof(float), agreed.donor);
  auto optimizerState = optimizer_->saveState();
  for (auto& values : optimizerState) broadcastHost(values, agreed.donor);
  optimizer_->loadState(optimizerState);
  StateWords words = wordsOf(state_);
  std::vector<float> carrier((sizeof words + sizeof(float) - 1) / sizeof(float));
  std::memcpy(carrier.data(), &words, sizeof words);
  broadcastHost(carrier, agreed.donor);
  std::memcpy(&words, carrier.data(), sizeof words);
  state_ = stateOf(words);
  model_->zeroGrads();
  hasState_ = true;
}

}  // namespace ddp::detail
