// StoreState's durability hooks: requests tagged by REQUEST_ID, journal attachment, replay and
// snapshots. The journal sees StoreTable's effects; this file adds the idempotency table.
#include <vector>

#include "rendezvous/server/detail/store_state.hpp"

namespace ddp::detail {

namespace {

std::string flatten(const OutputQueue& queue) {
  std::vector<boost::asio::const_buffer> buffers;
  queue.collect(buffers);
  std::string bytes;
  for (const auto& b : buffers) bytes.append(static_cast<const char*>(b.data()), b.size());
  return bytes;
}

}  // namespace

bool StoreState::applyTagged(const wire::Request& r, uint64_t clientId, uint64_t sequence,
                             ServerConnection& client, OutputQueue& out, std::string& reason,
                             const Blob* buffer) {
  if (!wire::changesStore(r.op)) return apply(r, client, out, reason, buffer);
  if (const auto kept = requestIds_.seen(clientId, sequence)) {
    out.encode([&](std::string& bytes) { bytes.append(*kept); });
    return true;
  }
  OutputQueue reply(budget_);
  if (!apply(r, client, reply, reason, buffer)) return false;
  std::string bytes = flatten(reply);
  out.encode([&](std::string& b) { b.append(bytes); });
  if (journal_ != nullptr) {
    journal_->stage(Mutation{MutationKind::kRequestId, {}, bytes, clientId, sequence});
  }
  requestIds_.record(clientId, sequence, std::move(bytes));
  return true;
}

void StoreState::attachJournal(Journal* journal) {
  journal_ = journal;
  table_.setJournal(journal);
}

bool StoreState::replay(const Mutation& m) {
  switch (m.kind) {
    case MutationKind::kPut: {
      auto value = Blob::copy(budget_, m.value);
      return value && table_.put(m.key, std::move(*value));
    }
    case MutationKind::kAppend: return table_.append(m.key, m.value);
    case MutationKind::kErase: table_.erase(m.key); return true;
    case MutationKind::kQueuePush: {
      auto value = Blob::copy(budget_, m.value);
      return value && table_.queuePush(m.key, std::move(*value));
    }
    case MutationKind::kQueuePop: table_.queuePop(m.key); return true;
    case MutationKind::kClear: clear(); return true;
    case MutationKind::kRequestId:
      requestIds_.record(m.client, m.sequence, std::string(m.value));
      return budget_.used() <= budget_.limit();
    case MutationKind::kEnd: return true;
  }
  return true;
}

SnapshotItems StoreState::snapshot() const {
  SnapshotItems items;
  items.reserve(table_.numKeys() + requestIds_.size());
  table_.forEachValue([&](std::string_view key, const Blob& value) {
    items.push_back(SnapshotItem{MutationKind::kPut, std::string(key), value, 0, 0, {}});
  });
  table_.forEachQueued([&](std::string_view key, const Blob& value) {
    items.push_back(SnapshotItem{MutationKind::kQueuePush, std::string(key), value, 0, 0, {}});
  });
  requestIds_.forEach([&](uint64_t client, uint64_t sequence, std::string_view reply) {
    items.push_back(
        SnapshotItem{MutationKind::kRequestId, {}, Blob(), client, sequence, std::string(reply)});
  });
  return items;
}

}  // namespace ddp::detail
