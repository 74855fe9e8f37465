// InputBuffer: the bytes a connection received and has not consumed yet, charged to the
// MemoryBudget, growing on demand and shrinking back.
//
// An idle connection holds at most kIdleBytes. A read gets a small buffer that doubles while reads
// fill it (pipelined bursts) up to kMaxReadBytes. A request the decoder reports incomplete with a
// known size (a value's declared length) gets a buffer of exactly that size, reserved before its
// bytes arrive: a request the budget cannot hold is refused before it is buffered, and a value
// being received costs its size, not up to twice that. Once drained, a large buffer is given back.
// The buffer is a Blob so that StoreState can keep a large value by reference instead of copying
// it; a buffer shared that way is never written again (the next read gets a fresh one).
//
// Thread safety: none; one connection owns it.
#pragma once

#include <cstddef>
#include <optional>
#include <span>
#include <string_view>

#include "rendezvous/server/detail/memory_budget.hpp"

namespace ddp::detail {

class InputBuffer {
 public:
  static constexpr std::size_t kIdleBytes = 1024;
  static constexpr std::size_t kMaxReadBytes = 64 * 1024;

  InputBuffer(MemoryBudget& budget, std::size_t maxRequestBytes)
      : budget_(&budget), maxRequestBytes_(maxRequestBytes) {}

  // Received bytes not yet consumed.
  std::string_view pending() const { return buffer_.view().substr(begin_); }
  // The buffer holding pending() (for StoreState::apply's by-reference values).
  const Blob& blob() const { return buffer_; }

  // Room for the next read, given that the pending request needs `need` bytes in all (0: unknown).
  // Allocates, grows, compacts or gives back the buffer (so call it only with no read in flight);
  // nullopt when the budget cannot hold what is needed.
  std::optional<std::span<char>> room(std::size_t need);
  // `n` bytes were read into room().
  void commit(std::size_t n);
  // Drops `n` bytes from the front of pending(). Never moves the buffer (a read may be in flight
  // into its free tail).
  void consume(std::size_t n);
  // Bytes the buffer holds (capacity), for tests and stats.
  std::size_t capacity() const { return buffer_.capacity(); }

 private:
  // Moves pending() into a fresh buffer of `capacity` bytes; false when it does not fit.
  bool moveTo(std::size_t capacity);

  MemoryBudget* budget_;
  std::size_t maxRequestBytes_;
  Blob buffer_;             // [begin_, buffer_.size()) is pending
  std::size_t begin_ = 0;
  std::size_t readBytes_ = kIdleBytes;  // size of the next plain read
  std::size_t lastRoom_ = 0;
  bool plainRead_ = true;  // the last room() was for whatever comes, not a known request
};

}  // namespace ddp::detail
