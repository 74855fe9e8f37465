#include "rendezvous/algorithm/detail/rendezvous_assign.hpp"

#include <algorithm>
#include <climits>
#include <optional>
#include <string_view>
#include <tuple>

#include "rendezvous/algorithm/detail/rendezvous_text.hpp"

namespace ddp::detail {

namespace {

// The interface addresses as one field, "a,b,c" (addresses hold no ','), at most
// kMaxInterfaceAddrs of them.
std::string joinAddrs(const std::vector<std::string>& addrs) {
  std::string out;
  for (size_t i = 0; i < addrs.size() && i < kMaxInterfaceAddrs; ++i) {
    out += (out.empty() ? "" : ",") + addrs[i];
  }
  return out;
}

std::vector<std::string> splitAddrs(std::string_view field) {
  std::vector<std::string> out;
  const std::string text = unescapeField(field);
  for (size_t start = 0; start < text.size() && out.size() < kMaxInterfaceAddrs;) {
    const size_t comma = std::min(text.find(',', start), text.size());
    if (comma > start) out.push_back(text.substr(start, comma - start));
    start = comma + 1;
  }
  return out;
}

void appendRecord(std::string& out, const JoinRecord& r) {
  const auto& n = r.node;
  out += std::to_string(r.slot) + '\t' + std::to_string(r.prevRank) + '\t' +
         std::to_string(r.prevGeneration) + '\t' + std::to_string(n.pid) + '\t' +
         std::to_string(n.localWorldSize) + '\t' + std::to_string(n.requestedRank) + '\t' +
         std::to_string(n.order) + '\t' + escapeField(n.host) + '\t' + escapeField(n.addr) + '\t' +
         escapeField(n.role) + '\t' + escapeField(joinAddrs(n.interfaceAddrs));
}

JoinRecord parseRecord(std::string_view line) {
  const char* what = "join record";
  // 10 fields: a join record of a version without the interface addresses.
  const bool withAddrs = std::count(line.begin(), line.end(), '\t') == 10;
  const auto f = splitFields(line, withAddrs ? 11 : 10, what);
  JoinRecord r;
  r.slot = parseField<int64_t>(f[0], what);
  r.prevRank = parseField<int>(f[1], what);
  r.prevGeneration = parseField<int64_t>(f[2], what);
  r.node.pid = parseField<int>(f[3], what);
  r.node.localWorldSize = parseField<int>(f[4], what);
  r.node.requestedRank = parseField<int>(f[5], what);
  r.node.order = parseField<int>(f[6], what);
  r.node.host = unescapeField(f[7]);
  r.node.addr = unescapeField(f[8]);
  r.node.role = unescapeField(f[9]);
  if (withAddrs) r.node.interfaceAddrs = splitAddrs(f[10]);
  return r;
}

std::string describe(const JoinRecord& r) {
  return r.node.host + " (addr " + r.node.addr + ", pid " + std::to_string(r.node.pid) + ")";
}

}  // namespace

std::string encodeJoinRecord(const JoinRecord& record) {
  std::string out;
  appendRecord(out, record);
  return out;
}

JoinRecord decodeJoinRecord(const std::string& value) { return parseRecord(value); }

std::string encodeMembership(const RoundMembership& m) {
  std::string out = std::to_string(m.generation) + '\t' + std::to_string(m.restartsUsed) + '\t' +
                    escapeField(m.error) + '\n';
  out.reserve(out.size() + m.members.size() * 64);
  for (const auto& record : m.members) {
    appendRecord(out, record);
    out += '\n';
  }
  return out;
}

RoundMembership decodeMembership(const std::string& value) {
  const char* what = "round roster";
  const std::string_view text(value);
  size_t pos = 0;
  const auto head = splitFields(nextLine(text, pos, what), 3, what);
  RoundMembership m;
  m.generation = parseField<int64_t>(head[0], what);
  m.restartsUsed = parseField<int>(head[1], what);
  m.error = unescapeField(head[2]);
  while (pos < text.size()) m.members.push_back(parseRecord(nextLine(text, pos, what)));
  return m;
}

std::vector<JoinRecord> assignNodeRanks(std::vector<JoinRecord> joined, int64_t generation) {
  const int n = static_cast<int>(joined.size());
  std::vector<std::optional<JoinRecord>> byRank(n);
  std::vector<JoinRecord> unranked;
  for (auto& record : joined) {
    const int want = record.node.requestedRank;
    if (want < 0) {
      unranked.push_back(std::move(record));
      continue;
    }
    if (want >= n) {
      throw ConfigError("node " + describe(record) + " asked for node rank " +
                        std::to_string(want) + " but round " + std::to_string(generation) +
                        " has " + std::to_string(n) + " nodes (ranks 0.." +
                        std::to_string(n - 1) + ")");
    }
    if (byRank[want]) {
      throw ConfigError("nodes " + describe(*byRank[want]) + " and " + describe(record) +
                        " both asked for node rank " + std::to_string(want));
    }
    byRank[want] = std::move(record);
  }
  auto order = [](const JoinRecord& r) {
    return std::make_tuple(r.node.order < 0 ? INT_MAX : r.node.order,
                           r.prevRank < 0 ? INT_MAX : r.prevRank, r.node.host, r.node.addr,
                           r.node.pid, r.slot);
  };
  std::sort(unranked.begin(), unranked.end(),
            [&](const JoinRecord& a, const JoinRecord& b) { return order(a) < order(b); });
  std::vector<JoinRecord> ordered;
  ordered.reserve(n);
  size_t next = 0;
  for (auto& slot : byRank) ordered.push_back(slot ? std::move(*slot) : std::move(unranked[next++]));
  return ordered;
}

}  // namespace ddp::detail
