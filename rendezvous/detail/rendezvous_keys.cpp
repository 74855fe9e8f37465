#include "rendezvous/detail/rendezvous_keys.hpp"

#include <algorithm>
#include <charconv>

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

}  // namespace

RendezvousKeys::RendezvousKeys(const std::string& runId) : root_("rdzv/" + runId + "/") {}

std::string encodeRoundEnd(const RoundEnd& end) {
  for (const auto& entry : kKindNames) {
    if (entry.kind == end.kind) return std::string(entry.name) + "|" + end.detail;
  }
  return "peerlost|" + end.detail;
}

RoundEnd decodeRoundEnd(const std::string& value) {
  const auto bar = value.find('|');
  const std::string name = value.substr(0, bar);
  RoundEnd end;
  end.detail = bar == std::string::npos ? value : value.substr(bar + 1);
  for (const auto& entry : kKindNames) {
    if (name == entry.name) end.kind = entry.kind;
  }
  return end;
}

void endRound(Store& store, const RendezvousKeys& keys, int64_t g, const RoundEnd& end) {
  store.compareSet(keys.end(g), "", encodeRoundEnd(end));
  store.compareSet(keys.round(), std::to_string(g), std::to_string(g + 1));
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
  int64_t parsed = 0;
  const auto result = std::from_chars(value.data(), value.data() + value.size(), parsed);
  if (result.ec != std::errc() || result.ptr != value.data() + value.size()) {
    throw ProtocolError("rendezvous key '" + key + "' holds '" + value +
                        "', expected a decimal integer");
  }
  return parsed;
}

}  // namespace ddp::detail
