// MemoryBudget: the one bound on the memory a StoreServer holds on behalf of its clients, and the
// two ways memory is charged to it: Charge (an RAII amount) and Blob (shared bytes that carry their
// charge until the last reference goes).
//
// Charged: stored values (Blob), keys and per-entry bookkeeping (Charge, estimated), wait and
// ON_CLOSE registrations, queue items, partially received requests (the input buffer reserves the
// size a request declares before its bytes arrive) and reply buffers. A mutation first asks
// tryCharge()/Blob::copy() and is refused (the connection closed with a reason) when the budget
// cannot hold it, so no allocation a client can trigger grows past the limit. charge() (forced)
// is only for small fixed-size items (a reply byte, a counter).
//
// Thread safety: none; one thread (the server's io_context) owns a budget and everything charged
// to it. used() may be read from other threads through ServerStats (an atomic mirror).
#pragma once

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <optional>
#include <string_view>

namespace ddp::detail {

class MemoryBudget {
 public:
  explicit MemoryBudget(std::size_t limit) : limit_(limit) {}
  MemoryBudget(const MemoryBudget&) = delete;
  MemoryBudget& operator=(const MemoryBudget&) = delete;

  // Charges `bytes` if they fit under the limit; false (nothing charged) otherwise.
  bool tryCharge(std::size_t bytes) {
    if (bytes > available()) return false;
    add(bytes);
    return true;
  }
  // Charges `bytes` even past the limit (small fixed-size items only).
  void charge(std::size_t bytes) { add(bytes); }
  void release(std::size_t bytes) {
    used_.store(used() - (bytes < used() ? bytes : used()), std::memory_order_relaxed);
  }

  bool fits(std::size_t bytes) const { return bytes <= available(); }
  std::size_t used() const { return used_.load(std::memory_order_relaxed); }
  std::size_t limit() const { return limit_; }
  std::size_t available() const { return used() < limit_ ? limit_ - used() : 0; }
  // Highest used() so far.
  std::size_t peak() const { return peak_.load(std::memory_order_relaxed); }

 private:
  void add(std::size_t bytes) {
    const std::size_t now = used() + bytes;
    used_.store(now, std::memory_order_relaxed);  // one writer: load + store is enough
    if (now > peak()) peak_.store(now, std::memory_order_relaxed);
  }

  std::size_t limit_;
  std::atomic<std::size_t> used_{0};
  std::atomic<std::size_t> peak_{0};
};

// An amount charged to a budget, released when the Charge is destroyed. Move-only.
class Charge {
 public:
  Charge() = default;
  // Forced charge (see MemoryBudget::charge).
  Charge(MemoryBudget& budget, std::size_t bytes) : budget_(&budget), bytes_(bytes) {
    budget.charge(bytes);
  }
  // nullopt when `bytes` do not fit.
  static std::optional<Charge> tryTake(MemoryBudget& budget, std::size_t bytes);
  Charge(Charge&& other) noexcept { *this = std::move(other); }
  Charge& operator=(Charge&& other) noexcept;
  Charge(const Charge&) = delete;
  Charge& operator=(const Charge&) = delete;
  ~Charge() { reset(); }

  void reset();
  // Makes this charge `bytes` on `budget` (forced), releasing or charging the difference.
  void set(MemoryBudget& budget, std::size_t bytes);
  std::size_t bytes() const { return bytes_; }

 private:
  MemoryBudget* budget_ = nullptr;
  std::size_t bytes_ = 0;
};

// Immutable-by-default bytes shared by reference (a stored value, a reply being written, the
// request buffer it arrived in). The memory is charged to a budget when allocated and released
// when the last Blob (or aliasing owner) goes. Copying a Blob copies the reference.
class Blob {
 public:
  Blob() = default;

  // A charged copy of `bytes`; nullopt when the budget cannot hold it.
  static std::optional<Blob> copy(MemoryBudget& budget, std::string_view bytes);
  // A charged, uninitialised buffer of `capacity` bytes (size 0); nullopt when it does not fit.
  static std::optional<Blob> allocate(MemoryBudget& budget, std::size_t capacity);
  // A Blob viewing `bytes`, which lie inside the buffer `owner` keeps alive (no copy, no charge:
  // the owner's allocation is already charged).
  static Blob alias(const Blob& owner, std::string_view bytes);

  std::string_view view() const { return {data_.get(), size_}; }
  std::size_t size() const { return size_; }
  bool empty() const { return size_ == 0; }
  // Bytes allocated for this buffer (what its allocation charged), 0 for an alias or empty Blob.
  std::size_t capacity() const { return capacity_; }
  // True when no other Blob shares the buffer (it may be written in place).
  bool unique() const { return data_.use_count() == 1; }

  // Appends `bytes`: in place when unique and there is room, else into a new buffer grown by half
  // again (charged; the old one is released when no one else holds it). False when it does not fit.
  bool append(MemoryBudget& budget, std::string_view bytes);

  // Writable bytes of a unique, allocated Blob: [data(), data() + capacity()).
  char* data() { return data_.get(); }
  void resize(std::size_t size) { size_ = size; }

 private:
  std::shared_ptr<char[]> data_;
  std::size_t size_ = 0;
  std::size_t capacity_ = 0;
};

// Bytes an allocation costs beyond its payload (malloc header, shared_ptr control block): the
// estimate every Charge of a container node or Blob adds.
inline constexpr std::size_t kAllocationOverhead = 48;

// The default --max-memory: a quarter of physical memory, and at most half of RLIMIT_AS and of
// the cgroup's memory.max when those are set; at least 64 MiB.
std::size_t defaultMemoryBudget();

}  // namespace ddp::detail
