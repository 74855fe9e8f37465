// LoopTicker: keeps a Gloo TCP device's event loop turning while pairs connect or close.
//
// Gloo's device thread sleeps in epoll_wait up to 10 ms when no socket is ready, and a thread
// that takes a descriptor off the loop (Loop::unregisterDescriptor: the connecting side of every
// pair in Pair::connect, every pair when it closes) waits for the loop's next turn. Since
// connectFullMesh connects a rank's pairs one after another, each rank waited ~10 ms per peer:
// ~40 ms of a 4-rank communicator's construction, on the path of every recovery in place.
//
// A LoopTicker registers an eventfd with the device's loop and signals it every `period` from a
// thread of its own, so each such wait ends within about one period.
//
// Thread safety: construct and destroy on one thread; the device must stay alive meanwhile (the
// ticker holds a reference to it).
#pragma once

#include <atomic>
#include <chrono>
#include <memory>
#include <thread>

namespace gloo::transport {
class Device;
}

namespace ddp::detail {

class LoopTicker {
 public:
  // `device` must be Gloo's TCP device (any other kind: the ticker does nothing). Never throws:
  // when an eventfd or a thread cannot be had, Gloo keeps its 10 ms turns.
  explicit LoopTicker(std::shared_ptr<gloo::transport::Device> device,
                      std::chrono::microseconds period = std::chrono::microseconds(200));
  // Stops the thread; the loop thread takes the eventfd off the loop itself (no wait for a turn).
  ~LoopTicker();

  LoopTicker(const LoopTicker&) = delete;
  LoopTicker& operator=(const LoopTicker&) = delete;

 private:
  struct Handler;
  std::shared_ptr<gloo::transport::Device> device_;
  std::unique_ptr<Handler> handler_;
  std::atomic<bool> stop_{false};
  std::thread thread_;
};

}  // namespace ddp::detail
