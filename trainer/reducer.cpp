#include "trainer/reducer.hpp"

#include <algorithm>
#include <cstdint>

#include "rendezvous/base/error.hpp"

namespace ddp {

bool overlapGradientAllreduce(bool sharedMemory, int localWorldSize, int computeThreads,
                              int cpus) {
  return !sharedMemory || int64_t(localWorldSize) * computeThreads < cpus;
}

Reducer::Reducer(Model& model, Communicator* comm, ReducerOptions options)
    : model_(model), comm_(comm && comm->size() > 1 ? comm : nullptr), overlap_(options.overlap) {
  const auto& tensors = model_.tensors();
  bucketOfTensor_.assign(tensors.size(), -1);
  const std::size_t capElems = std::max<std::size_t>(1, options.bucketBytes / sizeof(float));
  const std::size_t firstCapElems = std::max<std::size_t>(
      1, std::min(options.bucketBytes, options.firstBucketBytes) / sizeof(float));
  for (int t = static_cast<int>(tensors.size()) - 1; t >= 0; --t) {
    const auto& range = tensors[static_cast<std::size_t>(t)];
    const std::size_t cap = buckets_.size() <= 1 ? firstCapElems : capElems;
    if (buckets_.empty() || buckets_.back().count + range.count > cap) {
      buckets_.push_back({range.offset + range.count, 0, {}});
    }
    auto& b = buckets_.back();
    b.offset = range.offset;  // tensors arrive in decreasing offset order
    b.count += range.count;
    b.tensors.push_back(t);
    bucketOfTensor_[static_cast<std::size_t>(t)] = static_cast<int>(buckets_.size()) - 1;
  }
  pending_.assign(buckets_.size(), 0);
  if (comm_ && overlap_) thread_ = std::thread([this] { commLoop(); });
  if (comm_ && !overlap_) {
    if (void* stream = model_.commStream()) comm_->setStream(stream);  // as commLoop does
  }
}

Reducer::~Reducer() {
  {
    std::lock_guard<std::mutex> lock(mutex_);
    stop_ = true;
  }
  cv_.notify_all();
  if (thread_.joinable()) thread_.join();
}

void Reducer::rethrowIfFailed() {
  std::lock_guard<std::mutex> lock(mutex_);
  if (error_) std::rethrow_exception(error_);
}

void Reducer::prepare() {
  if (!comm_) return;
  rethrowIfFailed();
  for (std::size_t b = 0; b < buckets_.size(); ++b) {
    pending_[b] = static_cast<int>(buckets_[b].tensors.size());
  }
  std::lock_guard<std::mutex> lock(mutex_);
  reduced_ = 0;
}

void Reducer::markReady(int tensor) {
  if (!comm_) return;
  int b = bucketOfTensor_.at(static_cast<std::size_t>(tensor));
  if (--pending_[static_cast<std::size_t>(b)] != 0 || !overlap_) return;
  void* token = model_.gradsReadyToken();
  {
    std::lock_guard<std::mutex> lock(mutex_);
    if (error_) std::rethrow_exception(error_);
    queue_.emplace_back(b, token);
  }
  cv_.notify_all();
}

void Reducer::finish() {
  if (!comm_) return;
  for (std::size_t b = 0; b < buckets_.size(); ++b) {
    if (pending_[b] != 0) {
      throw Error("reducer: bucket " + std::to_string(b) + " still misses " +
                  std::to_string(pending_[b]) + " gradients at the end of backward");
    }
  }
  if (!overlap_) return reduceAll();
  std::unique_lock<std::mutex> lock(mutex_);
  cv_.wait(lock, [&] { return error_ || reduced_ == buckets_.size(); });
  if (error_) std::rethrow_exception(error_);
}

void Reducer::reduceAll() {
  rethrowIfFailed();
  model_.waitForGrads(model_.gradsReadyToken());
  try {
    for (const auto& bucket : buckets_) {
      comm_->allreduce(model_.grads() + bucket.offset, bucket.count, DataType::kFloat32,
                       ReduceOp::kSum);
    }
  } catch (...) {
    std::lock_guard<std::mutex> lock(mutex_);
    error_ = std::current_exception();
    throw;
  }
}

void Reducer::commLoop() {
  if (void* stream = model_.commStream()) comm_->setStream(stream);
  for (;;) {
    std::pair<int, void*> job;
    {
      std::unique_lock<std::mutex> lock(mutex_);
      cv_.wait(lock, [&] { return stop_ || !queue_.empty(); });
      if (stop_) return;
      job = queue_.front();
      queue_.pop_front();
    }
    try {
      const auto& bucket = buckets_[static_cast<std::size_t>(job.first)];
      model_.waitForGrads(job.second);
      comm_->allreduce(model_.grads() + bucket.offset, bucket.count, DataType::kFloat32,
                       ReduceOp::kSum);
      std::lock_guard<std::mutex> lock(mutex_);
      ++reduced_;
    } catch (...) {
      std::lock_guard<std::mutex> lock(mutex_);
      error_ = std::current_exception();
    }
    cv_.notify_all();
  }
}

}  // namespace ddp
