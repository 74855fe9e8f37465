#include "rendezvous/server/detail/output_queue.hpp"

#include <algorithm>

namespace ddp::detail {

namespace {

constexpr std::size_t kRefBytes = sizeof(std::pair<std::size_t, Blob>);

}  // namespace

bool OutputQueue::reserve(std::size_t bytes, std::size_t references) {
  const std::size_t needBytes = bytes_.size() + bytes;
  const std::size_t needRefs = refs_.size() + references;
  if (needBytes <= bytes_.capacity() && needRefs <= refs_.capacity()) return true;
  auto held = [](std::size_t b, std::size_t r) { return b + r * kRefBytes; };
  auto fits = [&](std::size_t total) {
    return total <= charge_.bytes() || budget_->fits(total - charge_.bytes());
  };
  // Grow geometrically when the budget allows, else to exactly what is needed.
  std::size_t byteCap = std::max(bytes_.capacity(), needBytes > bytes_.capacity()
                                                        ? std::max(needBytes, 2 * bytes_.capacity())
                                                        : needBytes);
  std::size_t refCap = std::max(refs_.capacity(), needRefs > refs_.capacity()
                                                      ? std::max(needRefs, 2 * refs_.capacity())
                                                      : needRefs);
  if (!fits(held(byteCap, refCap))) {
    byteCap = std::max(bytes_.capacity(), needBytes);
    refCap = std::max(refs_.capacity(), needRefs);
    if (!fits(held(byteCap, refCap))) return false;
  }
  if (byteCap > bytes_.capacity()) {
    std::string grown;  // reserve() on a fresh string allocates exactly (libstdc++ may double)
    grown.reserve(byteCap);
    grown.append(bytes_);
    bytes_.swap(grown);
  }
  if (refCap > refs_.capacity()) refs_.reserve(refCap);
  settle();
  return true;
}

void OutputQueue::putU8(uint8_t v) {
  bytes_.push_back(static_cast<char>(v));
  settle();
}

void OutputQueue::putU32(uint32_t v) {
  bytes_.append(reinterpret_cast<const char*>(&v), sizeof(v));
  settle();
}

void OutputQueue::putI64(int64_t v) {
  bytes_.append(reinterpret_cast<const char*>(&v), sizeof(v));
  settle();
}

void OutputQueue::putStr(std::string_view s) {
  const uint64_t len = s.size();
  bytes_.append(reinterpret_cast<const char*>(&len), sizeof(len));
  bytes_.append(s.data(), s.size());
  settle();
}

void OutputQueue::putValue(const Blob& value) {
  if (value.size() < kReferenceAbove) {
    putStr(value.view());
    return;
  }
  const uint64_t len = value.size();
  bytes_.append(reinterpret_cast<const char*>(&len), sizeof(len));
  refs_.emplace_back(bytes_.size(), value);
  referenced_ += value.size();
  settle();
}

void OutputQueue::collect(std::vector<boost::asio::const_buffer>& out) const {
  std::size_t from = 0;
  for (const auto& [offset, value] : refs_) {
    if (offset > from) out.emplace_back(bytes_.data() + from, offset - from);
    out.emplace_back(value.view().data(), value.size());
    from = offset;
  }
  if (bytes_.size() > from) out.emplace_back(bytes_.data() + from, bytes_.size() - from);
}

void OutputQueue::clear() {
  bytes_.clear();
  refs_.clear();
  referenced_ = 0;
  if (bytes_.capacity() > kKeepCapacity) std::string().swap(bytes_);
  if (refs_.capacity() > 4) decltype(refs_)().swap(refs_);
  settle();
}

void OutputQueue::settle() {
  const std::size_t held = bytes_.capacity() + refs_.capacity() * kRefBytes;
  charge_.set(*budget_, held);
}

}  // namespace ddp::detail
