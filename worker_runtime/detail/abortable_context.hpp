// AbortableContext: a Gloo context whose blocked operations can be ended from another thread
// (GlooCommunicator::abort, elastic_group.hpp's watchdog).
//
// Why: shutting a pair's socket down fails the operations Gloo still has *queued* on that pair,
// but not the one whose bytes are on the wire. Gloo 0.0~git20220518's tcp::Pair::signalException
// wakes the buffers of pending sends and receives and of bound-buffer writes, yet not the unbound
// buffer of the message it is reading (rx_) or writing (tx_). A peer killed or stopped halfway
// through a message — the donor SIGKILLed while it hands its state over, a peer frozen in the
// middle of an allreduce segment — leaves this rank's waitRecv/waitSend waiting its whole budget
// (the communicator's timeout, minutes), whatever happens to the sockets.
//
// So every unbound buffer made on this context (by our send/recv and by Gloo's own collectives)
// is registered with an AbortSwitch: abort() wakes each wait with abortWaitRecv/abortWaitSend, and
// from then on every wait returns false at once (Gloo's collectives ignore that result and run to
// their end without waiting; GlooCommunicator turns an aborted operation into CommError).
//
// Thread safety: AbortSwitch::abort() from any thread, any time; the rest as Gloo's context.
#pragma once

#include <atomic>
#include <memory>
#include <mutex>
#include <set>

#include <gloo/rendezvous/context.h>

namespace gloo::transport {
class UnboundBuffer;
}

namespace ddp::detail {

class AbortSwitch {
 public:
  // Wakes every registered buffer's wait and makes later waits return false at once. Returns true
  // for the first call only. Never blocks on I/O, never throws.
  bool abort() noexcept;
  bool aborted() const noexcept { return aborted_.load(std::memory_order_acquire); }

  // A buffer registered after abort() is aborted as it registers.
  void add(gloo::transport::UnboundBuffer* buffer);
  void remove(gloo::transport::UnboundBuffer* buffer) noexcept;

 private:
  std::atomic<bool> aborted_{false};
  std::mutex mutex_;
  std::set<gloo::transport::UnboundBuffer*> buffers_;  // Guarded by mutex_
};

class AbortableContext final : public gloo::rendezvous::Context {
 public:
  AbortableContext(int rank, int size) : gloo::rendezvous::Context(rank, size) {}

  // After connectFullMesh(): every unbound buffer made from now on registers with `abortSwitch`.
  void attach(std::shared_ptr<AbortSwitch> abortSwitch);
};

}  // namespace ddp::detail
