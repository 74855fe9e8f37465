// OutputQueue: the replies a connection owes, ready to be written with one gather write.
//
// Small replies are copied into one byte buffer; a value of kReferenceAbove bytes or more is not
// copied but referenced (its Blob is kept alive until written), so a GET of a 256 MiB value costs
// a few bytes of memory per reader, and an overwrite while the reply is in flight is safe. The
// byte buffer is charged to the MemoryBudget: reserve() asks before a reply whose size a client
// chooses (MULTI_GET, LIST_KEYS) and may refuse; fixed-size replies are charged without asking.
//
// Thread safety: none; one connection (the server's io_context thread) owns it.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include <boost/asio/buffer.hpp>

#include "rendezvous/server/detail/memory_budget.hpp"

namespace ddp::detail {

class OutputQueue {
 public:
  // Values at least this long are referenced rather than copied.
  static constexpr std::size_t kReferenceAbove = 4096;
  // A byte buffer of at most this capacity is kept when the queue is cleared.
  static constexpr std::size_t kKeepCapacity = 256;

  explicit OutputQueue(MemoryBudget& budget) : budget_(&budget) {}
  OutputQueue(OutputQueue&&) = default;
  OutputQueue& operator=(OutputQueue&&) = default;

  // Bytes a `str` reply of `value` adds to the byte buffer (header, and the value unless it is
  // referenced).
  static std::size_t copiedBytes(const Blob& value) {
    return 8 + (value.size() >= kReferenceAbove ? 0 : value.size());
  }

  // Makes room for `bytes` more copied bytes and `references` more referenced values, charged to
  // the budget; false (nothing changed) when the budget cannot hold them.
  bool reserve(std::size_t bytes, std::size_t references = 0);

  void putU8(uint8_t v);
  void putU32(uint32_t v);
  void putI64(int64_t v);
  // str: u64 length + bytes (copied).
  void putStr(std::string_view s);
  // str: u64 length + the value, referenced when it is large.
  void putValue(const Blob& value);
  // Lets `encode(std::string&)` append raw bytes (a wire:: encoder), then charges what it grew.
  template <typename F>
  void encode(F&& encode) {
    encode(bytes_);
    settle();
  }

  bool empty() const { return bytes_.empty() && refs_.empty(); }
  // Bytes queued, referenced values included.
  std::size_t size() const { return bytes_.size() + referenced_; }
  // The queued bytes in order, as buffers for one gather write (valid until the queue changes).
  void collect(std::vector<boost::asio::const_buffer>& out) const;
  // Drops everything (written); gives a large byte buffer back to the budget.
  void clear();

 private:
  // Brings the charge in line with the byte buffer's capacity.
  void settle();

  MemoryBudget* budget_;
  std::string bytes_;
  std::vector<std::pair<std::size_t, Blob>> refs_;  // a value to send once bytes_[0, first) went
  std::size_t referenced_ = 0;
  Charge charge_;
};

}  // namespace ddp::detail
