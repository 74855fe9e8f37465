#include "rendezvous/algorithm/detail/round_records.hpp"

#include <algorithm>
#include <cctype>

#include "rendezvous/base/error.hpp"

namespace ddp::detail {

namespace {

bool validName(const std::string& name) {
  return !name.empty() && std::all_of(name.begin(), name.end(), [](unsigned char c) {
    return std::isalnum(c) || c == '-' || c == '_' || c == '.';
  });
}

std::vector<std::string> recordKeys(const RendezvousKeys& keys, int64_t g, const std::string& name,
                                    const std::vector<int>& ranks) {
  std::vector<std::string> out;
  out.reserve(ranks.size());
  for (int rank : ranks) out.push_back(keys.record(g, name, rank));
  return out;
}

// The records that exist now, one check (and get) per key: the path after a deadline.
std::vector<std::optional<std::string>> presentRecords(Store& store,
                                                       const std::vector<std::string>& keys) {
  std::vector<std::optional<std::string>> values;
  values.reserve(keys.size());
  for (const auto& key : keys) values.push_back(peek(store, key));
  return values;
}

}  // namespace

void checkRecordName(const std::string& name) {
  if (!validName(name)) {
    throw ProtocolError("round record name '" + name +
                        "' is empty or has characters other than letters, digits, '-', '_', '.'");
  }
}

std::vector<std::string> decodeRecordNames(const std::string& value) {
  std::vector<std::string> names;
  size_t pos = 0;
  while (pos < value.size()) {
    auto eol = value.find('\n', pos);
    if (eol == std::string::npos) eol = value.size();
    std::string name = value.substr(pos, eol - pos);
    if (validName(name) && std::find(names.begin(), names.end(), name) == names.end()) {
      names.push_back(std::move(name));
    }
    pos = eol + 1;
  }
  return names;
}

void publishRecord(Store& store, const RendezvousKeys& keys, int64_t g, const std::string& name,
                   int rank, const std::string& value) {
  checkRecordName(name);
  // Listed first: a record that exists is always found by deleteRoundRecords().
  store.append(keys.recordNames(g), name + "\n");
  store.set(keys.record(g, name, rank), value);
}

RecordsOrEnd awaitRecords(Store& store, const RendezvousKeys& keys, int64_t g,
                          const std::string& name, const std::vector<int>& ranks,
                          Clock::time_point deadline, std::chrono::milliseconds slice) {
  checkRecordName(name);
  const std::vector<std::string> wanted = recordKeys(keys, g, name, ranks);
  if (wanted.empty()) return {};
  while (true) {
    const auto budget = std::clamp(remaining(deadline), std::chrono::milliseconds(1), slice);
    try {
      store.wait(wanted, budget);
      const std::vector<std::string> got = store.multiGet(wanted);
      return {std::vector<std::optional<std::string>>(got.begin(), got.end()), std::nullopt};
    } catch (const TimeoutError&) {
      // One slice passed without every record: has the round ended meanwhile?
    }
    if (auto end = readRoundEnd(store, keys, g)) {
      // Records published before the round ended still count (a leader's last word).
      if (store.check(wanted)) continue;
      return {presentRecords(store, wanted), end};
    }
    if (Clock::now() >= deadline) return {presentRecords(store, wanted), std::nullopt};
  }
}

void deleteRoundRecords(Store& store, const RendezvousKeys& keys, int64_t g, size_t ranks) {
  const auto listed = peek(store, keys.recordNames(g));
  if (!listed) return;
  for (const auto& name : decodeRecordNames(*listed)) {
    for (size_t rank = 0; rank < ranks; ++rank) {
      store.deleteKey(keys.record(g, name, static_cast<int>(rank)));
    }
  }
}

}  // namespace ddp::detail
