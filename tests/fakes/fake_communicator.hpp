// FakeCommunicator: an in-process Communicator for ranks running as threads of one test.
//
// A FakeGroup holds one slot per rank; every collective copies this rank's input into its slot,
// waits on the group's barrier, computes the result from all slots in rank order (so every rank
// gets bit-identical results), and waits again. Fault injection: failAtCall(n) makes the n-th
// collective (1-based, counted per rank) of every rank throw CommError; abort() (a rank died)
// makes every current and later wait throw CommError instead of hanging. send/recv go through a
// mailbox per (sender, receiver), in order; they count as calls for failAtCall too.
//
// Thread safety: each FakeCommunicator is used by its own rank thread; the group is shared.
#pragma once

#include <algorithm>
#include <atomic>
#include <condition_variable>
#include <mutex>
#include <cstring>
#include <deque>
#include <map>
#include <memory>
#include <utility>
#include <vector>

#include "rendezvous/base/error.hpp"
#include "worker_runtime/communicator.hpp"

namespace ddp::test {

class FakeGroup {
 public:
  explicit FakeGroup(int size) : size_(size), slots_(size) {}
  int size() const { return size_; }
  void failAtCall(int n) { failAt_ = n; }
  // A member left: every wait now throws CommError.
  void abort() {
    std::lock_guard<std::mutex> lock(mutex_);
    aborted_ = true;
    cv_.notify_all();
  }

 private:
  friend class FakeCommunicator;
  // Blocks until all ranks arrived; throws CommError once the group is aborted.
  void arriveAndWait() {
    std::unique_lock<std::mutex> lock(mutex_);
    if (aborted_) throw CommError("fake communicator: a peer left the group");
    const uint64_t generation = generation_;
    if (++arrived_ == size_) {
      arrived_ = 0;
      ++generation_;
      cv_.notify_all();
      return;
    }
    cv_.wait(lock, [&] { return generation_ != generation || aborted_; });
    if (generation_ == generation) throw CommError("fake communicator: a peer left the group");
  }

  void post(int from, int to, std::vector<char> message) {
    std::lock_guard<std::mutex> lock(mutex_);
    mailboxes_[{from, to}].push_back(std::move(message));
    cv_.notify_all();
  }
  std::vector<char> take(int from, int to) {
    std::unique_lock<std::mutex> lock(mutex_);
    auto& box = mailboxes_[{from, to}];
    cv_.wait(lock, [&] { return !box.empty() || aborted_; });
    if (box.empty()) throw CommError("fake communicator: a peer left the group");
    std::vector<char> message = std::move(box.front());
    box.pop_front();
    return message;
  }

  int size_;
  std::vector<std::vector<char>> slots_;
  std::map<std::pair<int, int>, std::deque<std::vector<char>>> mailboxes_;  // guarded by mutex_
  std::atomic<int> failAt_{0};
  std::mutex mutex_;
  std::condition_variable cv_;
  int arrived_ = 0;          // guarded by mutex_
  uint64_t generation_ = 0;  // guarded by mutex_
  bool aborted_ = false;     // guarded by mutex_
};

class FakeCommunicator final : public Communicator {
 public:
  FakeCommunicator(std::shared_ptr<FakeGroup> group, int rank) : group_(std::move(group)), rank_(rank) {}

  int rank() const override { return rank_; }
  int size() const override { return group_->size(); }
  CommBackend backend() const override { return CommBackend::kGloo; }
  int calls() const { return calls_; }

  void allreduce(void* buf, std::size_t count, DataType type, ReduceOp op) override {
    exchange(buf, count * 4, type);
    auto* out = static_cast<float*>(buf);
    for (std::size_t i = 0; i < count; ++i) {
      float s = 0.0f;
      for (int r = 0; r < size(); ++r) s += reinterpret_cast<const float*>(group_->slots_[r].data())[i];
      out[i] = op == ReduceOp::kAvg ? s / float(size()) : s;
    }
    group_->arriveAndWait();
  }
  void broadcast(void* buf, std::size_t bytes, int root) override {
    exchange(buf, bytes, DataType::kFloat32);
    std::memcpy(buf, group_->slots_[root].data(), bytes);
    group_->arriveAndWait();
  }
  void barrier() override {
    exchange(nullptr, 0, DataType::kFloat32);
    group_->arriveAndWait();
  }
  void allgather(const void* send, void* recv, std::size_t countPerRank, DataType type) override {
    exchange(send, countPerRank * 4, type);
    for (int r = 0; r < size(); ++r) {
      std::memcpy(static_cast<char*>(recv) + r * countPerRank * 4, group_->slots_[r].data(),
                  countPerRank * 4);
    }
    group_->arriveAndWait();
  }
  void reduceScatter(const void* send, void* recv, std::size_t countPerRank, DataType type,
                     ReduceOp op) override {
    exchange(send, countPerRank * 4 * size(), type);
    auto* out = static_cast<float*>(recv);
    for (std::size_t i = 0; i < countPerRank; ++i) {
      float s = 0.0f;
      for (int r = 0; r < size(); ++r) {
        s += reinterpret_cast<const float*>(group_->slots_[r].data())[rank_ * countPerRank + i];
      }
      out[i] = op == ReduceOp::kAvg ? s / float(size()) : s;
    }
    group_->arriveAndWait();
  }

  void send(const void* buf, std::size_t bytes, int peer) override {
    countCall();
    const auto* p = static_cast<const char*>(buf);
    group_->post(rank_, peer, std::vector<char>(p, p + bytes));
  }
  void recv(void* buf, std::size_t bytes, int peer) override {
    countCall();
    const std::vector<char> message = group_->take(peer, rank_);
    if (message.size() != bytes) throw CommError("fake communicator: message size differs");
    std::memcpy(buf, message.data(), bytes);
  }

 private:
  void countCall() {
    if (++calls_ == group_->failAt_.load()) {
      throw CommError("fake communicator: injected failure at call " + std::to_string(calls_));
    }
  }
  void exchange(const void* data, std::size_t bytes, DataType type) {
    if (type != DataType::kFloat32) throw CommError("fake communicator: only float32");
    countCall();
    auto& slot = group_->slots_[rank_];
    slot.assign(static_cast<const char*>(data), static_cast<const char*>(data) + bytes);
    group_->arriveAndWait();
  }

  std::shared_ptr<FakeGroup> group_;
  int rank_;
  int calls_ = 0;
};

}  // namespace ddp::test
