#include "rendezvous/server/detail/request_ids.hpp"

namespace ddp::detail {

namespace {
// Bookkeeping of one entry beside its reply bytes (list node, map node).
constexpr std::size_t kEntryBytes = 128;
}  // namespace

std::optional<std::string_view> RequestIds::seen(uint64_t client, uint64_t sequence) const {
  const auto it = index_.find(client);
  if (it == index_.end() || sequence > it->second->sequence) return std::nullopt;
  if (sequence < it->second->sequence) return std::string_view();
  return std::string_view(it->second->reply);
}

void RequestIds::record(uint64_t client, uint64_t sequence, std::string reply) {
  auto it = index_.find(client);
  if (it != index_.end()) {
    order_.splice(order_.end(), order_, it->second);
  } else {
    if (index_.size() >= capacity_ && !order_.empty()) {
      index_.erase(order_.front().client);
      order_.pop_front();
    }
    order_.push_back(Entry{client, 0, {}, {}});
    it = index_.emplace(client, std::prev(order_.end())).first;
  }
  Entry& entry = *it->second;
  entry.sequence = sequence;
  entry.charge.set(budget_, kEntryBytes + reply.size());
  entry.reply = std::move(reply);
}

void RequestIds::forEach(
    const std::function<void(uint64_t, uint64_t, std::string_view)>& f) const {
  for (const auto& entry : order_) f(entry.client, entry.sequence, entry.reply);
}

void RequestIds::clear() {
  index_.clear();
  order_.clear();
}

}  // namespace ddp::detail
