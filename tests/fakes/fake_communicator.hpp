// FakeCommunicator: an in-process Communicator for ranks running as threads of one test.
//
// A FakeGroup holds one slot per rank; every collective copies this rank's input into its slot,
// waits on a std::barrier, computes the result from all slots in rank order (so every rank gets
// bit-identical results), and waits again. Fault injection: failAtCall(n) makes the n-th
// collective (1-based, counted per rank) of every rank throw CommError, like a dead peer.
//
// Thread safety: each FakeCommunicator is used by its own rank thread; the group is shared.
#pragma once

#include <algorithm>
#include <atomic>
#include <barrier>
#include <cstring>
#include <memory>
#include <vector>

#include "rendezvous/error.hpp"
#include "worker_runtime/communicator.hpp"

namespace ddp::test {

class FakeGroup {
 public:
  explicit FakeGroup(int size) : size_(size), barrier_(size), slots_(size) {}
  int size() const { return size_; }
  void failAtCall(int n) { failAt_ = n; }

 private:
  friend class FakeCommunicator;
  int size_;
  std::barrier<> barrier_;
  std::vector<std::vector<char>> slots_;
  std::atomic<int> failAt_{0};
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
    group_->barrier_.arrive_and_wait();
  }
  void broadcast(void* buf, std::size_t bytes, int root) override {
    exchange(buf, bytes, DataType::kFloat32);
    std::memcpy(buf, group_->slots_[root].data(), bytes);
    group_->barrier_.arrive_and_wait();
  }
  void barrier() override {
    exchange(nullptr, 0, DataType::kFloat32);
    group_->barrier_.arrive_and_wait();
  }
  void allgather(const void* send, void* recv, std::size_t countPerRank, DataType type) override {
    exchange(send, countPerRank * 4, type);
    for (int r = 0; r < size(); ++r) {
      std::memcpy(static_cast<char*>(recv) + r * countPerRank * 4, group_->slots_[r].data(),
                  countPerRank * 4);
    }
    group_->barrier_.arrive_and_wait();
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
    group_->barrier_.arrive_and_wait();
  }

 private:
  void exchange(const void* data, std::size_t bytes, DataType type) {
    if (type != DataType::kFloat32) throw CommError("fake communicator: only float32");
    if (++calls_ == group_->failAt_.load()) {
      throw CommError("fake communicator: injected failure at call " + std::to_string(calls_));
    }
    auto& slot = group_->slots_[rank_];
    slot.assign(static_cast<const char*>(data), static_cast<const char*>(data) + bytes);
    group_->barrier_.arrive_and_wait();
  }

  std::shared_ptr<FakeGroup> group_;
  int rank_;
  int calls_ = 0;
};

}  // namespace ddp::test
