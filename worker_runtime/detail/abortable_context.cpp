#include "worker_runtime/detail/abortable_context.hpp"

#include <utility>
#include <vector>

#include <gloo/transport/context.h>
#include <gloo/transport/unbound_buffer.h>

namespace ddp::detail {
namespace {

// Gloo's own buffer, with its waits made abortable. send/recv go to the inner buffer, which hands
// itself (the transport's type) to the pair.
class AbortableBuffer final : public gloo::transport::UnboundBuffer {
 public:
  AbortableBuffer(std::unique_ptr<gloo::transport::UnboundBuffer> inner,
                  std::shared_ptr<AbortSwitch> abortSwitch)
      : gloo::transport::UnboundBuffer(inner->ptr, inner->size),
        inner_(std::move(inner)),
        switch_(std::move(abortSwitch)) {
    switch_->add(inner_.get());
  }
  ~AbortableBuffer() override { switch_->remove(inner_.get()); }

  bool waitRecv(int* rank, std::chrono::milliseconds timeout) override {
    // An abort() after this check set the inner buffer's abort flag: its wait returns at once.
    if (switch_->aborted()) return false;
    return inner_->waitRecv(rank, timeout);
  }
  bool waitSend(int* rank, std::chrono::milliseconds timeout) override {
    if (switch_->aborted()) return false;
    return inner_->waitSend(rank, timeout);
  }
  void abortWaitRecv() override { inner_->abortWaitRecv(); }
  void abortWaitSend() override { inner_->abortWaitSend(); }
  void send(int dst, uint64_t slot, size_t offset, size_t nbytes) override {
    inner_->send(dst, slot, offset, nbytes);
  }
  void recv(int src, uint64_t slot, size_t offset, size_t nbytes) override {
    inner_->recv(src, slot, offset, nbytes);
  }
  void recv(std::vector<int> srcs, uint64_t slot, size_t offset, size_t nbytes) override {
    inner_->recv(std::move(srcs), slot, offset, nbytes);
  }

 private:
  std::unique_ptr<gloo::transport::UnboundBuffer> inner_;
  std::shared_ptr<AbortSwitch> switch_;
};

// The transport context of a connected gloo::Context, handing out AbortableBuffers. Pairs stay
// the inner context's (they hold a pointer to it and arbitrate through it).
class AbortableTransport final : public gloo::transport::Context {
 public:
  AbortableTransport(std::shared_ptr<gloo::transport::Context> inner,
                     std::shared_ptr<AbortSwitch> abortSwitch)
      : gloo::transport::Context(inner->rank, inner->size),
        inner_(std::move(inner)),
        switch_(std::move(abortSwitch)) {
    setTimeout(inner_->getTimeout());
  }

  std::unique_ptr<gloo::transport::Pair>& getPair(int rank) override {
    return inner_->getPair(rank);
  }
  std::unique_ptr<gloo::transport::Pair>& createPair(int rank) override {
    return inner_->createPair(rank);
  }
  std::unique_ptr<gloo::transport::UnboundBuffer> createUnboundBuffer(void* ptr,
                                                                      size_t size) override {
    return std::make_unique<AbortableBuffer>(inner_->createUnboundBuffer(ptr, size), switch_);
  }

 private:
  std::shared_ptr<gloo::transport::Context> inner_;
  std::shared_ptr<AbortSwitch> switch_;
};

}  // namespace

bool AbortSwitch::abort() noexcept {
  std::lock_guard<std::mutex> lock(mutex_);
  if (aborted_.exchange(true, std::memory_order_acq_rel)) return false;
  for (auto* buffer : buffers_) {
    buffer->abortWaitRecv();
    buffer->abortWaitSend();
  }
  return true;
}

void AbortSwitch::add(gloo::transport::UnboundBuffer* buffer) {
  std::lock_guard<std::mutex> lock(mutex_);
  buffers_.insert(buffer);
  if (aborted()) {
    buffer->abortWaitRecv();
    buffer->abortWaitSend();
  }
}

void AbortSwitch::remove(gloo::transport::UnboundBuffer* buffer) noexcept {
  std::lock_guard<std::mutex> lock(mutex_);
  buffers_.erase(buffer);
}

void AbortableContext::attach(std::shared_ptr<AbortSwitch> abortSwitch) {
  transportContext_ =
      std::make_shared<AbortableTransport>(std::move(transportContext_), std::move(abortSwitch));
}

}  // namespace ddp::detail
