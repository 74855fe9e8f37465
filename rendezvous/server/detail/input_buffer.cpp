#include "rendezvous/server/detail/input_buffer.hpp"

#include <algorithm>
#include <cstring>

namespace ddp::detail {

std::optional<std::span<char>> InputBuffer::room(std::size_t need) {
  std::size_t pending = buffer_.size() - begin_;
  if (pending == 0) {
    begin_ = 0;
    buffer_.resize(0);
    // Give back a buffer that grew for a burst or a large request, or that the store now shares.
    if (buffer_.capacity() > readBytes_ || !buffer_.unique()) buffer_ = Blob();
  }
  // Room from begin_: what the pending request needs, or one more read of readBytes_. Growing,
  // at least double (a list of keys reports its end only as it is parsed); a request of known
  // size (a value's declared length) gets exactly that.
  plainRead_ = need <= pending;
  const std::size_t want = plainRead_ ? pending + readBytes_ : need;
  const bool writable = buffer_.capacity() > 0 && buffer_.unique();
  if (!writable || buffer_.capacity() - begin_ < want) {
    const std::size_t doubled = std::max(want, std::min(2 * pending, maxRequestBytes_));
    if (!moveTo(doubled) && (doubled == want || !moveTo(want))) return std::nullopt;
  } else if (buffer_.capacity() - buffer_.size() < want - pending) {
    std::memmove(buffer_.data(), buffer_.data() + begin_, pending);  // compact
    buffer_.resize(pending);
    begin_ = 0;
  }
  lastRoom_ = buffer_.capacity() - buffer_.size();
  return std::span<char>(buffer_.data() + buffer_.size(), lastRoom_);
}

void InputBuffer::commit(std::size_t n) {
  buffer_.resize(buffer_.size() + n);
  // A plain read that fills the buffer means a burst: offer more next time; any other plain read
  // ends the burst. (Reads into a buffer sized for a known request say nothing about bursts.)
  if (plainRead_) readBytes_ = n == lastRoom_ ? std::min(2 * readBytes_, kMaxReadBytes) : kIdleBytes;
}

void InputBuffer::consume(std::size_t n) {
  // Only advances: a read may be in flight into the free tail. room() reclaims space.
  begin_ += n;
}

bool InputBuffer::moveTo(std::size_t capacity) {
  auto fresh = Blob::allocate(*budget_, capacity);
  if (!fresh) return false;
  const auto pending = this->pending();
  if (!pending.empty()) std::memcpy(fresh->data(), pending.data(), pending.size());
  fresh->resize(pending.size());
  buffer_ = std::move(*fresh);
  begin_ = 0;
  return true;
}

}  // namespace ddp::detail
