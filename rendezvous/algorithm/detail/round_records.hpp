// Round records: one small value per (name, node rank) of a round, under r/<g>/rec/<name>/<rank>,
// with the names listed at r/<g>/records so that deleting the round deletes them too
// (rendezvous_keys.hpp has the layout; Rendezvous::publishRoundRecord() the contract).
//
// Thread safety: free functions over the Store given; its rule applies.
#pragma once

#include <chrono>
#include <optional>
#include <string>
#include <vector>

#include "rendezvous/algorithm/detail/rendezvous_keys.hpp"
#include "rendezvous/algorithm/detail/rendezvous_wait.hpp"
#include "rendezvous/store/store.hpp"

namespace ddp::detail {

// Throws ProtocolError unless `name` is non-empty and made of letters, digits, '-', '_', '.'.
void checkRecordName(const std::string& name);

// Names listed in an r/<g>/records value, each once, in first-seen order; malformed ones skipped.
std::vector<std::string> decodeRecordNames(const std::string& value);

// Lists `name` for round g, then sets this node's record. Two round trips.
void publishRecord(Store& store, const RendezvousKeys& keys, int64_t g, const std::string& name,
                   int rank, const std::string& value);

// What awaitRecords() found: the values by position in `ranks` (nullopt: missing at the
// deadline), or that round g ended first.
struct RecordsOrEnd {
  std::vector<std::optional<std::string>> values;
  std::optional<RoundEnd> end;
};

// Waits (in slices of at most `slice`, the round's end checked between them) until the records
// `name` of every rank in `ranks` exist, then reads them with one multiGet. At `deadline` reads
// the ones that exist. A round that ended is reported only when some record is still missing.
// Throws what the store throws, except the TimeoutError of a slice.
RecordsOrEnd awaitRecords(Store& store, const RendezvousKeys& keys, int64_t g,
                          const std::string& name, const std::vector<int>& ranks,
                          Clock::time_point deadline, std::chrono::milliseconds slice);

// Deletes the records of round g for node ranks 0..ranks-1 (and nothing else). For deleteRound().
void deleteRoundRecords(Store& store, const RendezvousKeys& keys, int64_t g, size_t ranks);

}  // namespace ddp::detail
