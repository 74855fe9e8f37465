#include "worker_runtime/detail/gloo_loop_ticker.hpp"

#include <sys/epoll.h>
#include <sys/eventfd.h>
#include <unistd.h>

#include <cstdint>
#include <exception>
#include <future>

#include <gloo/transport/tcp/device.h>
#include <gloo/transport/tcp/loop.h>

namespace ddp::detail {
namespace {

// How long the destructor waits for the loop thread to take the eventfd off. The loop turns at
// least every 10 ms while its device lives; past this, the handler and eventfd are left (leaked)
// rather than freed under a loop that may still call them.
constexpr auto kRetireBudget = std::chrono::seconds(10);

void signal(int fd) {
  const uint64_t one = 1;
  (void)!::write(fd, &one, sizeof one);  // EAGAIN (counter full): the loop is woken already
}

}  // namespace

struct LoopTicker::Handler final : gloo::transport::tcp::Handler {
  gloo::transport::tcp::Device* device = nullptr;
  int fd = -1;
  std::atomic<bool> retire{false};
  std::promise<void> retired;

  // Runs on the device's loop thread.
  void handleEvents(int /*events*/) override {
    uint64_t count = 0;
    (void)!::read(fd, &count, sizeof count);
    if (!retire.load()) return;
    device->unregisterDescriptor(fd, this);  // on the loop thread: returns without a turn
    std::promise<void> done = std::move(retired);
    done.set_value();  // the owner may free this handler from here on: no member is used after
  }
};

LoopTicker::LoopTicker(std::shared_ptr<gloo::transport::Device> device,
                       std::chrono::microseconds period) {
  auto* tcp = dynamic_cast<gloo::transport::tcp::Device*>(device.get());
  if (!tcp) return;
  auto handler = std::make_unique<Handler>();
  handler->device = tcp;
  handler->fd = ::eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC);
  if (handler->fd < 0) return;
  try {
    tcp->registerDescriptor(handler->fd, EPOLLIN, handler.get());
  } catch (const std::exception&) {
    ::close(handler->fd);
    return;
  }
  device_ = std::move(device);
  handler_ = std::move(handler);
  try {
    thread_ = std::thread([this, period, fd = handler_->fd] {
      while (!stop_.load()) {
        signal(fd);
        std::this_thread::sleep_for(period);
      }
    });
  } catch (const std::exception&) {
    // No thread: the registered eventfd is taken off again by the destructor.
  }
}

LoopTicker::~LoopTicker() {
  stop_ = true;
  if (thread_.joinable()) thread_.join();
  if (!handler_) return;
  std::future<void> retired = handler_->retired.get_future();
  handler_->retire = true;
  signal(handler_->fd);
  if (retired.wait_for(kRetireBudget) != std::future_status::ready) {
    (void)handler_.release();  // the loop may still call it: never freed
    return;
  }
  ::close(handler_->fd);
}

}  // namespace ddp::detail
