// Reducer: DDP gradient synchronisation in buckets, overlapped with backward.
//
// The model's tensors are grouped, last tensor first (the order backward finishes them), into
// buckets of at most `bucketBytes` (a tensor larger than that gets a bucket of its own); like
// PyTorch DDP the first bucket is capped at min(1 MiB, bucketBytes) so communication starts early. Because
// the flat gradient buffer stores tensors in forward order, each bucket is one contiguous range
// and is reduced in place. During a synchronised backward the model announces every finished
// tensor (markReady); when the last tensor of a bucket arrives the bucket is queued to the
// reducer's communication thread, which sums it across ranks with Communicator::allreduce while
// backward keeps computing earlier layers. finish() waits for every bucket.
//
// Without overlap (ReducerOptions::overlap = false) there is no communication thread: finish()
// reduces the buckets one after another, in the same order, on the calling thread. That is the
// faster choice when the ranks already keep every CPU busy (CPU training with as many workers as
// cores): a communication thread then only takes turns with the training thread, and each bucket
// costs two thread hand-offs. The sums, and so the results, are the same either way.
//
// Averaging: the trainer scales the loss gradient by 1/(batch * world * accum), so the summed
// gradient is the DDP mean. Micro-steps of gradient accumulation simply do not call
// prepare()/markReady()/finish() (PyTorch's no_sync): gradients accumulate locally and the next
// synchronised step reduces the accumulated sum.
//
// Thread safety: prepare/markReady/finish are called from the training thread only. The
// communication thread is owned and joined by the destructor. A CommError on the communication
// thread is sticky: finish() and every later call rethrow it.
#pragma once

#include <condition_variable>
#include <cstddef>
#include <deque>
#include <exception>
#include <mutex>
#include <thread>
#include <vector>

#include "trainer/model.hpp"
#include "worker_runtime/communicator.hpp"

namespace ddp {

struct ReducerOptions {
  // Bucket capacity in bytes (PyTorch DDP's bucket_cap_mb default: 25 MiB).
  std::size_t bucketBytes = 25u << 20;
  // Cap of the first bucket (PyTorch: dist._DEFAULT_FIRST_BUCKET_BYTES = 1 MiB).
  std::size_t firstBucketBytes = 1u << 20;
  // true: a communication thread reduces each bucket as soon as backward completes it (PyTorch
  // DDP); false: finish() reduces them all on the calling thread (see the header comment).
  bool overlap = true;
};

// comm_overlap = auto: whether the reducer overlaps. Yes, unless the gradients are summed through
// shared memory (pure CPU work, no network latency to hide) and this host's ranks already fill
// its CPUs: localWorldSize x computeThreads >= cpus (the CPUs this process may run on). Pure.
bool overlapGradientAllreduce(bool sharedMemory, int localWorldSize, int computeThreads, int cpus);

class Reducer {
 public:
  struct Bucket {
    std::size_t offset = 0, count = 0;  // element range of the flat gradient buffer
    std::vector<int> tensors;           // tensor indices, backward order
  };

  // `comm` may be null (single process): then every call is a no-op. Starts the communication
  // thread when comm is set, comm->size() > 1 and options.overlap.
  Reducer(Model& model, Communicator* comm, ReducerOptions options);
  ~Reducer();
  Reducer(const Reducer&) = delete;
  Reducer& operator=(const Reducer&) = delete;

  const std::vector<Bucket>& buckets() const { return buckets_; }

  // Starts a synchronised backward: every bucket waits for all its tensors again.
  void prepare();
  // Tensor `tensor`'s gradient is final; queues its bucket when the bucket is complete. Does not
  // block. Rethrows a sticky communication error.
  void markReady(int tensor);
  // Blocks until every bucket has been reduced (each collective bounded by the communicator's
  // timeout); without overlap, reduces them here. Throws CommError (sticky) or ddp::Error when a
  // tensor was never announced.
  void finish();

 private:
  void commLoop();
  void reduceAll();  // overlap off: every bucket, in order, on the calling thread
  void rethrowIfFailed();

  Model& model_;
  Communicator* comm_;
  bool overlap_;
  std::vector<Bucket> buckets_;
  std::vector<int> bucketOfTensor_;
  std::vector<int> pending_;  // tensors still missing per bucket (training thread only)

  std::mutex mutex_;
  std::condition_variable cv_;
  // Guarded by mutex_:
  std::deque<std::pair<int, void*>> queue_;  // (bucket, device readiness token)
  std::size_t reduced_ = 0;
  std::exception_ptr error_;
  bool stop_ = false;

  std::thread thread_;
};

}  // namespace ddp
