#include "rendezvous/algorithm/detail/rendezvous_keys.hpp"

#include <algorithm>
#include <charconv>
#include <stdexcept>

namespace ddp::detail {

namespace {

struct KindName {
  RendezvousEventKind kind;
  const char* name;
};

constexpr KindName kKindNames[] = {
    {RendezvousEventKind::kScaleUp, "scaleup"},
    {RendezvousEventKind::kPeerLost, "peerlost"},
    {RendezvousEventKind::kRestartRequested, "restart"},
    {RendezvousEventKind::kJobFailed, "jobfailed"},
    {RendezvousEventKind::kStoreLost, "storelost"},
};
// r/<g>/end's kind of a round an agent's verdict ended (kJobFailed, RoundEnd::verdict).
constexpr const char* kVerdictName = "verdict";

// What peek() passes as `expected`: compareSet then returns it for a missing key without writing,
// and the current value otherwise (no stored value equals it).
constexpr std::string_view kAbsent = "\x01" "absent" "\x01";

template <typename T>
std::optional<T> parseNumber(std::string_view text) {
  T value{};
  const auto r = std::from_chars(text.data(), text.data() + text.size(), value);
  if (r.ec != std::errc() || r.ptr != text.data() + text.size()) return std::nullopt;
  return value;
}

}  // namespace

RendezvousKeys::RendezvousKeys(const std::string& runId, int64_t incarnation)
    : runId_(runId),
      incarnation_(incarnation),
      root_("rdzv/" + runId + "/" + std::to_string(incarnation) + "/") {}

std::vector<std::string> RendezvousKeys::roundKeys(int64_t g) const {
  return {count(g), closer(g), result(g), roster(g), end(g), gone(g), failCount(g),
          exitCount(g), exitDone(g), workerStore(g), left(g), leaving(g), spares(g),
          recordNames(g)};
}

std::optional<std::string> peek(Store& store, const std::string& key) {
  const std::string absent(kAbsent);
  std::string value = store.compareSet(key, absent, absent);
  if (value == absent) return std::nullopt;
  return value;
}

namespace {

std::vector<std::string> slice(const std::vector<std::string>& v, size_t from) {
  const size_t to = std::min(v.size(), from + kKeysPerRequest);
  return std::vector<std::string>(v.begin() + static_cast<std::ptrdiff_t>(from),
                                  v.begin() + static_cast<std::ptrdiff_t>(to));
}

}  // namespace

std::vector<std::string> multiGetAll(Store& store, const std::vector<std::string>& keys) {
  if (keys.size() <= kKeysPerRequest) return store.multiGet(keys);
  std::vector<std::string> values;
  values.reserve(keys.size());
  for (size_t from = 0; from < keys.size(); from += kKeysPerRequest) {
    for (auto& value : store.multiGet(slice(keys, from))) values.push_back(std::move(value));
  }
  return values;
}

void multiSetAll(Store& store, const std::vector<std::string>& keys,
                 const std::vector<std::string>& values) {
  if (keys.size() != values.size()) throw std::invalid_argument("multiSetAll: sizes differ");
  if (keys.size() <= kKeysPerRequest) return store.multiSet(keys, values);
  for (size_t from = 0; from < keys.size(); from += kKeysPerRequest) {
    store.multiSet(slice(keys, from), slice(values, from));
  }
}

bool checkAll(Store& store, const std::vector<std::string>& keys) {
  if (keys.size() <= kKeysPerRequest) return store.check(keys);
  for (size_t from = 0; from < keys.size(); from += kKeysPerRequest) {
    if (!store.check(slice(keys, from))) return false;
  }
  return true;
}

std::string encodeRoundEnd(const RoundEnd& end) {
  std::string name = "peerlost";
  for (const auto& entry : kKindNames) {
    if (entry.kind == end.kind) name = entry.name;
  }
  if (end.kind == RendezvousEventKind::kJobFailed && end.verdict) name = kVerdictName;
  if (end.lostRank >= 0) name += "/" + std::to_string(end.lostRank);
  return name + "|" + end.detail;
}

RoundEnd decodeRoundEnd(const std::string& value) {
  const auto bar = value.find('|');
  std::string name = value.substr(0, bar);
  RoundEnd end;
  end.detail = bar == std::string::npos ? value : value.substr(bar + 1);
  if (const auto slash = name.find('/'); slash != std::string::npos) {
    end.lostRank = parseNumber<int>(std::string_view(name).substr(slash + 1)).value_or(-1);
    name.resize(slash);
  }
  for (const auto& entry : kKindNames) {
    if (name == entry.name) end.kind = entry.kind;
  }
  if (name == kVerdictName) {
    end.kind = RendezvousEventKind::kJobFailed;
    end.verdict = true;
  }
  return end;
}

void endRound(Store& store, const RendezvousKeys& keys, int64_t g, const RoundEnd& end) {
  store.compareSet(keys.end(g), "", encodeRoundEnd(end));
  store.compareSet(keys.round(), std::to_string(g), std::to_string(g + 1));
}

std::optional<RoundEnd> readRoundEnd(Store& store, const RendezvousKeys& keys, int64_t g) {
  const auto hint = peek(store, keys.round());
  const auto round = hint ? parseNumber<int64_t>(*hint) : std::nullopt;
  if (round && *round <= g) return std::nullopt;  // the common case: still running
  return explainRoundEnd(store, keys, g);
}

RoundEnd explainRoundEnd(Store& store, const RendezvousKeys& keys, int64_t g) {
  RoundEnd end;
  if (auto value = peek(store, keys.end(g))) {
    end = decodeRoundEnd(*value);
  } else {
    end.removed = true;
    end.detail = "round " + std::to_string(g) +
                 " ended and its keys were removed while this node was not answering";
  }
  if (end.kind != RendezvousEventKind::kJobFailed) {
    // The budget may have been spent while another reason ended the round first.
    if (auto ended = peek(store, keys.ended())) {
      const JobEnd job = decodeJobEnd(*ended);
      // The lost rank stays: a node declared lost in that round learns it was dropped.
      if (!job.succeeded) {
        end = {RendezvousEventKind::kJobFailed, job.reason, end.lostRank, end.removed,
               job.verdict};
      }
    }
  }
  return end;
}

std::string encodeJobEnd(const JobEnd& end) {
  const char* status = end.succeeded ? "ok" : end.verdict ? "verdict" : "failed";
  return std::string(status) + "|" + std::to_string(end.unixMs) + "|" +
         std::to_string(end.generation) + "|" + end.reason;
}

JobEnd decodeJobEnd(const std::string& value) {
  JobEnd end;
  end.reason = value;
  const auto a = value.find('|');
  const auto b = a == std::string::npos ? a : value.find('|', a + 1);
  const auto c = b == std::string::npos ? b : value.find('|', b + 1);
  if (c == std::string::npos) return end;
  const std::string_view text(value);
  const auto ms = parseNumber<int64_t>(text.substr(a + 1, b - a - 1));
  const auto gen = parseNumber<int64_t>(text.substr(b + 1, c - b - 1));
  const auto status = text.substr(0, a);
  if (!ms || !gen || (status != "ok" && status != "failed" && status != "verdict")) return end;
  end.succeeded = status == "ok";
  end.verdict = status == "verdict";
  end.unixMs = *ms;
  end.generation = *gen;
  end.reason = value.substr(c + 1);
  return end;
}

JobEnd jobEndNow(bool succeeded, int64_t generation, std::string reason) {
  const auto now = std::chrono::system_clock::now().time_since_epoch();
  return JobEnd{succeeded, std::chrono::duration_cast<std::chrono::milliseconds>(now).count(),
                generation, std::move(reason)};
}

std::vector<int> decodeGone(const std::string& value) {
  std::vector<int> ranks;
  size_t pos = 0;
  while (pos < value.size()) {
    auto eol = value.find('\n', pos);
    if (eol == std::string::npos) eol = value.size();
    if (auto rank = parseNumber<int>(std::string_view(value).substr(pos, eol - pos))) {
      ranks.push_back(*rank);
    }
    pos = eol + 1;
  }
  return ranks;
}

std::string frameRecord(const std::string& record) {
  return std::to_string(record.size()) + "\n" + record;
}

std::vector<std::string> unframeRecords(const std::string& value) {
  std::vector<std::string> records;
  size_t pos = 0;
  while (pos < value.size()) {
    const auto newline = value.find('\n', pos);
    size_t length = 0;
    const char* first = value.data() + pos;
    const char* last = value.data() + (newline == std::string::npos ? value.size() : newline);
    const auto parsed = std::from_chars(first, last, length);
    if (newline == std::string::npos || parsed.ptr != last || parsed.ec != std::errc() ||
        newline + 1 + length > value.size()) {
      throw ProtocolError("failure records in the rendezvous store are corrupt at byte " +
                          std::to_string(pos));
    }
    records.push_back(value.substr(newline + 1, length));
    pos = newline + 1 + length;
  }
  return records;
}

std::chrono::milliseconds effectiveHeartbeatTimeout(const RendezvousSettings& settings) {
  if (settings.heartbeatTimeout.count() > 0) return settings.heartbeatTimeout;
  return settings.keepAliveInterval * std::max(settings.keepAliveMaxAttempt, 1);
}

int64_t parseCount(const std::string& key, const std::string& value) {
  const auto parsed = parseNumber<int64_t>(value);
  if (!parsed) {
    throw ProtocolError("rendezvous key '" + key + "' holds '" + value +
                        "', expected a decimal integer");
  }
  return *parsed;
}

}  // namespace ddp::detail
