// RequestIds: the server's half of ddprun's REQUEST_ID extension (wire_codec.hpp) — per client
// id, the highest request sequence applied and that request's reply bytes, so that a request a
// client sends again after reconnecting is answered without being applied twice.
//
// Bounded: at most `capacity` clients (the least recently used one is forgotten first; a client
// forgotten while it still retries would see its request applied again, so the capacity is far
// above the clients a daemon serves), each reply charged to the MemoryBudget (forced: a reply is
// already in memory in the connection's output). Under --data-dir every change is journaled in
// the same record as the request's mutations (StoreState::applyTagged).
//
// Thread safety: none; the server's io_context thread owns it.
#pragma once

#include <cstddef>
#include <cstdint>
#include <functional>
#include <list>
#include <optional>
#include <string>
#include <string_view>
#include <unordered_map>

#include "rendezvous/server/detail/memory_budget.hpp"

namespace ddp::detail {

class RequestIds {
 public:
  static constexpr std::size_t kDefaultCapacity = 65536;

  explicit RequestIds(MemoryBudget& budget, std::size_t capacity = kDefaultCapacity)
      : budget_(budget), capacity_(capacity) {}

  // For a request (client, sequence) that was applied already: the reply to send again (empty
  // for an older request, whose reply the client had no reason to wait for). nullopt: new.
  std::optional<std::string_view> seen(uint64_t client, uint64_t sequence) const;
  // Notes that (client, sequence) was applied and answered with `reply`.
  void record(uint64_t client, uint64_t sequence, std::string reply);
  std::size_t size() const { return index_.size(); }
  // Every entry, least recently used first (a snapshot; replaying record() in this order
  // rebuilds the same table).
  void forEach(const std::function<void(uint64_t, uint64_t, std::string_view)>& f) const;
  void clear();

 private:
  struct Entry {
    uint64_t client = 0;
    uint64_t sequence = 0;
    std::string reply;
    Charge charge;
  };
  MemoryBudget& budget_;
  std::size_t capacity_;
  std::list<Entry> order_;  // least recently used first
  std::unordered_map<uint64_t, std::list<Entry>::iterator> index_;
};

}  // namespace ddp::detail
