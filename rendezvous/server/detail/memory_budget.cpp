#include "rendezvous/server/detail/memory_budget.hpp"

#include <sys/resource.h>
#include <unistd.h>

#include <algorithm>
#include <cstring>
#include <fstream>
#include <string>

namespace ddp::detail {

namespace {

// Frees a Blob's buffer and gives its charge back.
struct ReleasingDelete {
  MemoryBudget* budget;
  std::size_t charged;
  void operator()(char* p) const {
    delete[] p;
    budget->release(charged);
  }
};

// The cgroup v2 memory limit of this process, if one is set.
std::optional<std::size_t> cgroupMemoryMax() {
  std::ifstream self("/proc/self/cgroup");
  std::string line, path;
  while (std::getline(self, line)) {
    if (line.rfind("0::", 0) == 0) path = line.substr(3);
  }
  if (path.empty()) return std::nullopt;
  std::ifstream limit("/sys/fs/cgroup" + path + "/memory.max");
  std::string text;
  if (!(limit >> text) || text == "max") return std::nullopt;
  try {
    return static_cast<std::size_t>(std::stoull(text));
  } catch (const std::exception&) {
    return std::nullopt;
  }
}

}  // namespace

std::optional<Charge> Charge::tryTake(MemoryBudget& budget, std::size_t bytes) {
  if (!budget.fits(bytes)) return std::nullopt;
  return Charge(budget, bytes);
}

Charge& Charge::operator=(Charge&& other) noexcept {
  if (this != &other) {
    reset();
    budget_ = other.budget_;
    bytes_ = other.bytes_;
    other.budget_ = nullptr;
    other.bytes_ = 0;
  }
  return *this;
}

void Charge::reset() {
  if (budget_ != nullptr) budget_->release(bytes_);
  budget_ = nullptr;
  bytes_ = 0;
}

void Charge::set(MemoryBudget& budget, std::size_t bytes) {
  if (budget_ != &budget) {
    reset();
    budget_ = &budget;
  }
  if (bytes > bytes_) budget.charge(bytes - bytes_);
  if (bytes < bytes_) budget.release(bytes_ - bytes);
  bytes_ = bytes;
}

std::optional<Blob> Blob::allocate(MemoryBudget& budget, std::size_t capacity) {
  const std::size_t charged = capacity + kAllocationOverhead;
  if (!budget.tryCharge(charged)) return std::nullopt;
  Blob blob;
  // new char[n] leaves the bytes uninitialised: pages are only touched as data arrives.
  blob.data_ = std::shared_ptr<char[]>(new char[capacity], ReleasingDelete{&budget, charged});
  blob.capacity_ = capacity;
  return blob;
}

std::optional<Blob> Blob::copy(MemoryBudget& budget, std::string_view bytes) {
  if (bytes.empty()) return Blob();
  auto blob = allocate(budget, bytes.size());
  if (!blob) return std::nullopt;
  std::memcpy(blob->data(), bytes.data(), bytes.size());
  blob->size_ = bytes.size();
  return blob;
}

Blob Blob::alias(const Blob& owner, std::string_view bytes) {
  Blob blob;
  blob.data_ = std::shared_ptr<char[]>(owner.data_, const_cast<char*>(bytes.data()));
  blob.size_ = bytes.size();
  return blob;
}

bool Blob::append(MemoryBudget& budget, std::string_view bytes) {
  if (bytes.empty()) return true;
  const std::size_t size = size_ + bytes.size();
  if (unique() && capacity_ >= size) {
    std::memcpy(data_.get() + size_, bytes.data(), bytes.size());
    size_ = size;
    return true;
  }
  auto grown = allocate(budget, std::max(size, size_ + size_ / 2));
  if (!grown) grown = allocate(budget, size);
  if (!grown) return false;
  if (size_ > 0) std::memcpy(grown->data(), data_.get(), size_);
  std::memcpy(grown->data() + size_, bytes.data(), bytes.size());
  grown->size_ = size;
  *this = std::move(*grown);
  return true;
}

std::size_t defaultMemoryBudget() {
  constexpr std::size_t kFloor = std::size_t{64} << 20;
  const long pages = ::sysconf(_SC_PHYS_PAGES);
  const long pageSize = ::sysconf(_SC_PAGESIZE);
  std::size_t budget = pages > 0 && pageSize > 0
                           ? static_cast<std::size_t>(pages) * static_cast<std::size_t>(pageSize) / 4
                           : std::size_t{1} << 30;
  rlimit as{};
  if (::getrlimit(RLIMIT_AS, &as) == 0 && as.rlim_cur != RLIM_INFINITY) {
    budget = std::min<std::size_t>(budget, as.rlim_cur / 2);
  }
  if (const auto cgroup = cgroupMemoryMax()) budget = std::min(budget, *cgroup / 2);
  return std::max(budget, kFloor);
}

}  // namespace ddp::detail
