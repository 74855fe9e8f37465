// Recovery in place (docs/recovery.md): when a collective fails or the agent publishes a new
// quorum, this rank keeps its process, model and data; it joins the newest quorum (ElasticGroup),
// agrees with its peers on whose state to continue from and takes that state if its own differs.
// The interrupted step is redone from the agreed state.
#include <xxhash.h>

#include <algorithm>
#include <array>
#include <cstring>

#include "rendezvous/base/error.hpp"
#include "rendezvous/base/logging.hpp"
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

constexpr std::size_t kWordFloats = sizeof(StateWords) / sizeof(float);
static_assert(sizeof(StateWords) % sizeof(float) == 0);

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

// InterruptedStep as it travels beside the digest: the step's 8 bytes, the loss, the norm,
// complete (1) or not (0).
constexpr std::size_t kReportFloats = 5;

std::array<float, kReportFloats> packReport(const std::optional<InterruptedStep>& r) {
  std::array<float, kReportFloats> words{};
  const InterruptedStep step = r.value_or(InterruptedStep{});
  std::memcpy(words.data(), &step.step, sizeof step.step);
  words[2] = step.lossMean;
  words[3] = step.gradNorm;
  words[4] = step.complete ? 1.0f : 0.0f;
  return words;
}

InterruptedStep unpackReport(const float* words) {
  InterruptedStep r;
  std::memcpy(&r.step, words, sizeof r.step);
  r.lossMean = words[2];
  r.gradNorm = words[3];
  r.complete = words[4] != 0.0f;
  return r;
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
      if (comm_) {
        syncState();
      } else if (interrupted_) {  // alone in its world: its own interrupted step only
        finishInterruptedStep({*interrupted_}, state_.step);
      }
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
    // This process takes rank 0 over from another one of the job: the lines that one wrote stay.
    metrics_ = std::make_unique<MetricsSink>(cfg_.metrics, cfg_.tensorboardDir, cfg_.progressSeconds);
    metrics_->skipLoggedSteps();
    if (ctx_.publishPoint) metrics_->publishTo(ctx_.publishPoint);
  }
}

StateDigest TrainLoop::digest() {
  // A replacement process has no state worth keeping until a peer gave it one.
  if (!hasState_) return {-1, 0};
  // XXH3 (libxxhash): every survivor hashes its whole state while the replacement waits; a
  // byte-wise CRC of the benchmark model's 3.4 MB took ~10 ms of a loaded core.
  XXH3_state_t* h = XXH3_createState();
  if (h == nullptr) throw Error("trainer: out of memory for the state hash");
  std::vector<float> host;
  auto update = [&](const float* values) {
    const std::size_t n = model_->numParams();
    if (model_->onDevice()) {
      host.resize(n);
      model_->download(values, host.data(), n);
      values = host.data();
    }
    XXH3_64bits_update(h, values, n * sizeof(float));
  };
  XXH3_64bits_reset(h);
  model_->synchronize();
  update(model_->params());
  for (const float* buffer : optimizer_->stateBuffers()) update(buffer);
  const StateWords words = wordsOf(state_);
  XXH3_64bits_update(h, &words, sizeof words);
  const uint64_t hash = XXH3_64bits_digest(h);
  XXH3_freeState(h);
  return {state_.step, hash};
}

void TrainLoop::syncState() {
  const int world = ctx_.worldSize;
  // Each rank's digest and, beside it, the step whose afterStep it could not finish (if any).
  constexpr std::size_t kRecord = kDigestFloats + kReportFloats;
  std::array<float, kRecord> mine;
  const auto packed = packDigest(digest());
  const auto report = packReport(interrupted_ ? interrupted_ : lastLogged_);
  std::copy(packed.begin(), packed.end(), mine.begin());
  std::copy(report.begin(), report.end(), mine.begin() + kDigestFloats);
  std::vector<float> all(kRecord * std::size_t(world));
  auto buffer = model_->allocBuffer(all.size());
  model_->upload(mine.data(), buffer.get() + kRecord * std::size_t(ctx_.rank), kRecord);
  model_->synchronize();
  comm_->allgather(buffer.get() + kRecord * std::size_t(ctx_.rank), buffer.get(), kRecord,
                   DataType::kFloat32);
  model_->download(buffer.get(), all.data(), all.size());
  std::vector<StateDigest> digests;
  std::vector<InterruptedStep> reports;
  for (int r = 0; r < world; ++r) {
    digests.push_back(unpackDigest(all.data() + kRecord * r));
    reports.push_back(unpackReport(all.data() + kRecord * r + kDigestFloats));
  }
  const StateAgreement agreed = agreeOnState(digests);
  if (agreed.state.step < 0) {
    // Every rank is new: the job's state went with the processes that held it.
    group_->markStateLost();
    throw StateLost("quorum " + toString(group_->view().id) + ": no rank holds the training "
                    "state (every process is new); recovery in place is impossible");
  }
  if (!agreed.differ.empty()) takeState(agreed);
  finishInterruptedStep(reports, agreed.state.step);
}

void TrainLoop::takeState(const StateAgreement& agreed) {
  if (ctx_.rank == agreed.donor) {
    logger("trainer")->info("rank {} hands its state (step {}) to rank(s) {}", ctx_.rank,
                            agreed.state.step, rankList(agreed.differ));
  }
  // Straight into the model's and the optimizer's own memory: no copy, no allocation (on a loaded
  // machine the copies and page faults of 3 host copies of the state cost more than the sends).
  handOver(model_->params(), model_->numParams() * sizeof(float), agreed);
  for (float* buffer : optimizer_->stateBuffers()) {
    handOver(buffer, model_->numParams() * sizeof(float), agreed);
  }
  StateWords words = wordsOf(state_);
  std::array<float, kWordFloats> carrier;
  std::memcpy(carrier.data(), &words, sizeof words);
  auto wire = model_->allocBuffer(kWordFloats);
  model_->upload(carrier.data(), wire.get(), kWordFloats);
  model_->synchronize();
  handOver(wire.get(), sizeof words, agreed);
  model_->download(wire.get(), carrier.data(), kWordFloats);
  std::memcpy(&words, carrier.data(), sizeof words);
  state_ = stateOf(words);
  model_->zeroGrads();
  hasState_ = true;
}

void TrainLoop::finishInterruptedStep(const std::vector<InterruptedStep>& reports, int64_t step) {
  interrupted_.reset();
  // A rank interrupted in afterStep holds that step's loss; one that finished it (its line may be
  // written: MetricsSink does not write a step twice), a replacement and one that took the step's
  // state from the donor do not. The line's loss is the mean over the ranks that hold it.
  double lossSum = 0;
  int holders = 0;
  float gradNorm = 0;
  const InterruptedStep* done = nullptr;  // a rank that finished the step: the line's own loss
  for (const InterruptedStep& r : reports) {
    if (r.step != step) continue;
    if (r.complete) {
      if (done == nullptr) done = &r;
      continue;
    }
    if (holders++ == 0) gradNorm = r.gradNorm;
    lossSum += r.lossMean;
  }
  const bool last = finished();
  if (holders == 0) {
    // Every rank that holds the step finished it: only its line may be missing, when rank 0
    // died after the step's loss was averaged and before it wrote the line (MetricsSink writes
    // no step twice, so a rank 0 that wrote it writes nothing).
    if (done != nullptr && ctx_.rank == 0 && metrics_ && metrics_->lastLogged() < step) {
      logger("trainer")->info("step {} was done when rank 0's process failed before its metrics "
                              "line: the line is written now", step);
      reportMetrics(done->lossMean, done->gradNorm, /*logNow=*/true, last);
    }
    return;
  }
  const bool logNow = last || step % cfg_.logEvery == 0;
  if (ctx_.rank == 0) {
    logger("trainer")->info("step {} was done when a peer failed: its metrics line is written now",
                            step);
  }
  reportStep(done != nullptr ? done->lossMean : float(lossSum / holders),
             done != nullptr ? done->gradNorm : gradNorm, logNow, last);
}

void TrainLoop::handOver(void* buf, std::size_t bytes, const StateAgreement& agreed) {
  // A few ranks differ (a replacement, usually one): the donor sends to each, and the ranks that
  // agree already neither receive nor relay (a broadcast tree made one survivor receive and pass
  // on all of it). Past the depth of a broadcast tree, a broadcast is the quicker.
  int depth = 0;
  while ((1 << depth) < ctx_.worldSize) ++depth;
  if (int(agreed.differ.size()) > std::max(depth, 1)) {
    comm_->broadcast(buf, bytes, agreed.donor);
    return;
  }
  if (ctx_.rank == agreed.donor) {
    for (int r : agreed.differ) comm_->send(buf, bytes, r);
  } else if (std::binary_search(agreed.differ.begin(), agreed.differ.end(), ctx_.rank)) {
    comm_->recv(buf, bytes, agreed.donor);
  }
}

}  // namespace ddp::detail
